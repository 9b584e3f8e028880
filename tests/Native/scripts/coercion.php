<?php

/*
 * The calls of CoercionTest, run under valgrind's memcheck: each case of coercion/cases.php,
 * in PHP's coercive and strict typing modes (the calls are made from coercion/coercive.php and
 * coercion/strict.php), on the extension's class and on a userland twin of it, a class whose
 * methods declare the same parameters (read by reflection).
 *
 * Prints, as JSON, by mode and case:
 *  - expected: what the twin threw and the errors it raised; for null given to a parameter that
 *    is not nullable in coercive mode, what PHP's own str_repeat() does with it instead, since
 *    PHP takes it for an internal function's parameter (with a deprecation) and refuses it for a
 *    userland one;
 *  - actual: what the extension threw and raised, and what it did: the state the call left,
 *    read back with the values the twin received;
 *  - reference: when the twin accepted the call, the same with the values the twin received,
 *    given in strict mode.
 *
 *   php coercion.php
 */

declare(strict_types=1);

// PCRE's JIT compiles code that memcheck cannot follow, and reports reads it makes on purpose.
ini_set('pcre.jit', '0');

use Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;

require dirname(__DIR__, 2) . '/Support/Autoload.php';
Zeusi\GaneshaShmAdapter\Tests\Support\Autoload::register(false);
require __DIR__ . '/coercion/coercive.php';
require __DIR__ . '/coercion/strict.php';
$cases = require __DIR__ . '/coercion/cases.php';

const CALLERS = [
    'coercive' => 'Zeusi\\GaneshaShmAdapter\\Tests\\Native\\Coercion\\Coercive\\',
    'strict' => 'Zeusi\\GaneshaShmAdapter\\Tests\\Native\\Coercion\\Strict\\',
];
const TIME = 1_800_000_000;

// The twin, which keeps the arguments its methods were given, as PHP converted them.
$signatures = [];
foreach (array_unique(array_column($cases, 0)) as $method) {
    $parameters = [];
    foreach ((new ReflectionMethod(AbstractSlidingTimeWindowShm::class, $method))->getParameters() as $parameter) {
        $parameters[] = sprintf(
            '%s $%s%s',
            $parameter->getType(),
            $parameter->getName(),
            $parameter->isOptional() ? ' = ' . var_export($parameter->getDefaultValue(), true) : ''
        );
    }
    $signatures[] = sprintf('public function %s(%s) { self::$received = func_get_args(); }', $method, implode(', ', $parameters));
}
eval(sprintf('final class CoercionTwin { public static array $received = []; %s }', implode("\n", $signatures)));

/**
 * Each method: the adapter it is called on, valid arguments, what is set before the call and
 * what is read after it, both with the arguments given as the twin received them.
 *
 * @var array<string, array{adapter: callable(): (object|string), arguments: list<mixed>, prepare: callable, observe: callable}>
 */
$methods = [];
$rate = static fn (): TestAdapter => TestAdapter::forWindow(60);
$count = static fn (): TestAdapter => TestAdapter::forCount();
$nothing = static fn (): mixed => null;
$methods['load'] = [
    'adapter' => $rate,
    'arguments' => ['coercion_service'],
    'prepare' => static fn (TestAdapter $adapter, array $received) => $adapter->increment($received[0]),
    'observe' => static fn (TestAdapter $adapter, array $received, mixed $result): array => [$result === $adapter->load($received[0])],
];
$methods['increment'] = [
    'adapter' => $rate,
    'arguments' => ['coercion_service'],
    'prepare' => static fn (TestAdapter $adapter, array $received): int => $adapter->load($received[0]),
    'observe' => static fn (TestAdapter $adapter, array $received, mixed $result, int $before): array => [$adapter->load($received[0]) - $before],
];
$methods['loadStatus'] = [
    'adapter' => $rate,
    'arguments' => ['coercion_service'],
    'prepare' => static fn (TestAdapter $adapter, array $received) => $adapter->saveStatus($received[0], 3),
    'observe' => static fn (TestAdapter $adapter, array $received, mixed $result): array => [$result],
];
$methods['loadLastFailureTime'] = [
    'adapter' => $rate,
    'arguments' => ['coercion_service'],
    'prepare' => static fn (TestAdapter $adapter, array $received) => $adapter->saveLastFailureTime($received[0], TIME + 7),
    'observe' => static fn (TestAdapter $adapter, array $received, mixed $result): array => [$result],
];
$methods['saveLastFailureTime'] = [
    'adapter' => $rate,
    'arguments' => ['coercion_service', TIME],
    'prepare' => static fn (TestAdapter $adapter, array $received) => $adapter->saveLastFailureTime($received[0], 5),
    'observe' => static fn (TestAdapter $adapter, array $received): array => [$adapter->loadLastFailureTime($received[0])],
];
$methods['saveStatus'] = [
    'adapter' => $rate,
    'arguments' => ['coercion_service', 2],
    'prepare' => static fn (TestAdapter $adapter, array $received) => $adapter->saveStatus($received[0], 5),
    'observe' => static fn (TestAdapter $adapter, array $received): array => [$adapter->loadStatus($received[0])],
];
$methods['resetService'] = [
    'adapter' => $rate,
    'arguments' => ['coercion_service'],
    'prepare' => static fn (TestAdapter $adapter, array $received) => $adapter->increment("ganesha_{$received[0]}_failure"),
    'observe' => static fn (TestAdapter $adapter, array $received): array => [$adapter->load("ganesha_{$received[0]}_failure")],
];
$methods['save'] = [
    'adapter' => $count,
    'arguments' => ['coercion_service', 3],
    'prepare' => static fn (TestAdapter $adapter, array $received) => $adapter->save($received[0], 5),
    'observe' => static fn (TestAdapter $adapter, array $received): array => [$adapter->load($received[0])],
];
$methods['decrement'] = [
    'adapter' => $count,
    'arguments' => ['coercion_service'],
    'prepare' => static fn (TestAdapter $adapter, array $received) => $adapter->save($received[0], 5),
    'observe' => static fn (TestAdapter $adapter, array $received): array => [$adapter->load($received[0])],
];
// The adapter made: whether its bucket duration fits a window of one second, which names it.
$methods['__construct'] = [
    'adapter' => static fn (): string => TestAdapter::class,
    'arguments' => [null],
    'prepare' => $nothing,
    'observe' => static fn (string $class, array $received, mixed $result): array => [
        $result === null ? null : outcome(static fn () => $result->setContext(FakeContext::make(1)), false)['thrown'],
    ],
];

/** A message as it does not depend on the class declaring the method, nor on where it was called. */
function normalized(string $message): string
{
    return preg_replace(['/^[\w\\\\]+::(?=\w+\(\): )/', '/, called in .* on line \d+$/s'], '', $message);
}

/**
 * What `$call` returned or threw, and the errors PHP raised in it (deprecations thrown as
 * ErrorException when `$deprecationsThrow`).
 *
 * @return array{result: mixed, thrown: array{string, string}|null, errors: list<array{int, string}>}
 */
function outcome(callable $call, bool $deprecationsThrow): array
{
    $errors = [];
    set_error_handler(static function (int $level, string $message) use (&$errors, $deprecationsThrow): bool {
        if ($deprecationsThrow && $level === E_DEPRECATED) {
            throw new ErrorException($message, 0, $level);
        }
        $errors[] = [$level, normalized($message)];

        return true;
    });
    try {
        return ['result' => $call(), 'thrown' => null, 'errors' => $errors];
    } catch (Throwable $e) {
        return ['result' => null, 'thrown' => [get_class($e), normalized($e->getMessage())], 'errors' => $errors];
    } finally {
        restore_error_handler();
    }
}

/** @param list<mixed> $arguments */
function make(string $mode, object|string $target, string $method, array $arguments): mixed
{
    return $method === '__construct'
        ? (CALLERS[$mode] . 'construct')($target, $arguments)
        : (CALLERS[$mode] . 'call')($target, $method, $arguments);
}

/**
 * What PHP does with null for an internal function's parameter of `$type` that is not nullable,
 * as str_repeat(string $string, int $times) shows it, named as parameter `$number` (`$name`) of
 * `$method`: the outcome, and the value the parameter is given.
 *
 * @return array{array{result: mixed, thrown: array{string, string}|null, errors: list<array{int, string}>}, mixed}
 */
function internal_null(string $mode, string $type, string $method, int $number, string $name, bool $deprecationsThrow): array
{
    $outcome = outcome(
        static fn () => (CALLERS[$mode] . 'call_function')('str_repeat', $type === 'string' ? [null, 1] : ['x', null]),
        $deprecationsThrow
    );
    $rename = static fn (string $message): string => preg_replace(
        ['/^\w+\(\): /', '/#\d+ \(\$\w+\)/'],
        ["{$method}(): ", "#{$number} (\${$name})"],
        $message
    );
    $outcome['errors'] = array_map(static fn (array $error): array => [$error[0], $rename($error[1])], $outcome['errors']);
    if ($outcome['thrown'] !== null) {
        $outcome['thrown'][1] = $rename($outcome['thrown'][1]);
    }
    $received = $outcome['result'] === null ? null : ($type === 'string' ? $outcome['result'] : strlen($outcome['result']));

    return [$outcome, $received];
}

$report = [];
foreach (array_keys(CALLERS) as $mode) {
    foreach ($cases as $name => [$method, $index, $value, $deprecationsThrow]) {
        $spec = $methods[$method];
        $arguments = $spec['arguments'];
        $arguments[$index] = $value;
        $parameter = (new ReflectionMethod(AbstractSlidingTimeWindowShm::class, $method))->getParameters()[$index];

        if ($mode === 'coercive' && $value === null && !$parameter->allowsNull()) {
            [$expected, $converted] = internal_null($mode, (string) $parameter->getType(), $method, $index + 1, $parameter->getName(), $deprecationsThrow);
            $received = $expected['thrown'] === null ? array_replace($arguments, [$index => $converted]) : null;
        } else {
            CoercionTwin::$received = [];
            $twin = $method === '__construct' ? CoercionTwin::class : new CoercionTwin();
            $expected = outcome(static fn () => make($mode, $twin, $method, $arguments), $deprecationsThrow);
            $received = $expected['thrown'] === null ? CoercionTwin::$received : null;
        }

        $run = static function (string $mode, array $given) use ($spec, $method, $received, $deprecationsThrow): array {
            $target = ($spec['adapter'])();
            $before = ($spec['prepare'])($target, $received);
            $outcome = outcome(static fn () => make($mode, $target, $method, $given), $deprecationsThrow);
            $observed = ($spec['observe'])($target, $received, $outcome['result'], $before);

            return ['thrown' => $outcome['thrown'], 'errors' => $outcome['errors'], 'observed' => $observed];
        };
        $report[$mode][$name] = [
            'expected' => ['thrown' => $expected['thrown'], 'errors' => $expected['errors']],
            'actual' => $received === null
                ? outcome(static fn () => make($mode, ($spec['adapter'])(), $method, $arguments), $deprecationsThrow)
                : $run($mode, $arguments),
            'reference' => $received === null ? null : $run('strict', $received),
        ];
        unset($report[$mode][$name]['actual']['result']);
    }
}

echo json_encode($report, JSON_THROW_ON_ERROR | JSON_INVALID_UTF8_SUBSTITUTE), "\n";
