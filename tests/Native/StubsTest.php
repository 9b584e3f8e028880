<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\ApiDescriber;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * stubs/ganesha_shm.stub.php declares exactly what the extension registers: the stubs are
 * reflected in a child process without the extension (they declare the same names), the
 * extension in this one, and the two descriptions must be the same.
 */
final class StubsTest extends TestCase
{
    /** @var array{classes: array<string, mixed>, functions: array<string, mixed>} */
    private static array $stubs;

    /** @var array{classes: array<string, mixed>, functions: array<string, mixed>} */
    private static array $extension;

    public static function setUpBeforeClass(): void
    {
        $root = \dirname(__DIR__, 2);
        $code = \sprintf(
            'require %s;
            $classes = array_merge(get_declared_classes(), get_declared_interfaces(), get_declared_traits());
            $functions = get_defined_functions()["user"];
            require %s;
            $newClasses = array_values(array_diff(array_merge(get_declared_classes(), get_declared_interfaces(), get_declared_traits()), $classes));
            $newFunctions = array_values(array_diff(get_defined_functions()["user"], $functions));
            echo json_encode(\\%s::describe($newClasses, $newFunctions));',
            \var_export(__DIR__ . '/../Support/ApiDescriber.php', true),
            \var_export($root . '/stubs/ganesha_shm.stub.php', true),
            ApiDescriber::class
        );
        self::$stubs = Php::json($code, [], false);

        $extension = new \ReflectionExtension('ganesha_shm');
        $functions = [];
        foreach ($extension->getFunctions() as $function) {
            $functions[] = $function->getName();
        }
        // through JSON as the stubs' description, so that both have the same PHP types
        self::$extension = \json_decode(
            \json_encode(ApiDescriber::describe($extension->getClassNames(), $functions), \JSON_THROW_ON_ERROR),
            true,
            512,
            \JSON_THROW_ON_ERROR
        );
    }

    public function testTheStubsDeclareTheClassesOfTheExtension(): void
    {
        self::assertSame(['Zeusi\\GaneshaShmAdapter\\AbstractSlidingTimeWindowShm'], \array_keys(self::$extension['classes']));
        self::assertSame(\array_keys(self::$extension['classes']), \array_keys(self::$stubs['classes']));
    }

    public function testTheStubsDeclareTheFunctionsOfTheExtension(): void
    {
        self::assertSame(['ganesha_shm_info'], \array_keys(self::$extension['functions']));
        self::assertSame(\array_keys(self::$extension['functions']), \array_keys(self::$stubs['functions']));
    }

    public function testTheStubsOfTheFunctionsMatch(): void
    {
        self::assertSame(self::$extension['functions'], self::$stubs['functions']);
    }

    public function testTheStubsOfTheClassesMatch(): void
    {
        foreach (self::$extension['classes'] as $class => $description) {
            $stub = self::$stubs['classes'][$class] ?? [];
            foreach (['kind', 'abstract', 'final', 'parent', 'interfaces', 'constants', 'properties'] as $part) {
                self::assertSame($description[$part], $stub[$part] ?? null, "{$class}: {$part}");
            }
            self::assertSame(\array_keys($description['methods']), \array_keys($stub['methods'] ?? []), "{$class}: methods");
            foreach ($description['methods'] as $method => $signature) {
                self::assertSame($signature, $stub['methods'][$method], "{$class}::{$method}()");
            }
        }
    }

    /**
     * A method whose stub says it throws a LogicException before setContext() does, on an
     * adapter given no context, and every other method does not: the stubs' `@throws` lines
     * about the context are true of every method.
     */
    public function testTheStubsSayWhichMethodsThrowBeforeSetContext(): void
    {
        $stub = (string) \file_get_contents(\dirname(__DIR__, 2) . '/stubs/ganesha_shm.stub.php');
        \preg_match_all('~/\*\*((?:(?!\*/).)*)\*/\s*public function (\w+)\(~s', $stub, $methods, \PREG_SET_ORDER);
        $said = [];
        foreach ($methods as [, $comment, $method]) {
            $said[$method] = \preg_match('/@throws \\\\LogicException[^\n]*before setContext\(\)/', $comment) === 1;
        }
        self::assertTrue($said['increment'] ?? false, 'the stubs are read');

        $adapter = new class () extends \Zeusi\GaneshaShmAdapter\AbstractSlidingTimeWindowShm {};
        $arguments = ['string' => 'k', 'int' => 1, 'bool' => false];
        foreach ($said as $method => $saysItThrows) {
            // The context itself, its deprecated twin, and what needs none.
            if (\in_array($method, ['__construct', 'setContext', 'setConfiguration', 'supportCountStrategy', 'supportRateStrategy'], true)) {
                continue;
            }
            $parameters = (new \ReflectionMethod($adapter, $method))->getParameters();
            $given = \array_map(static fn (\ReflectionParameter $parameter) => $arguments[(string) $parameter->getType()], $parameters);
            try {
                $adapter->{$method}(...$given);
                $threw = false;
            } catch (\LogicException $exception) {
                $threw = \str_contains($exception->getMessage(), 'setContext()');
            }
            self::assertSame($saysItThrows, $threw, "{$method}(): " . ($threw ? 'throws before setContext(), unsaid' : 'said to throw before setContext()'));
        }
    }

    public function testTheStubOfGaneshaShmInfoListsItsKeysAndTypes(): void
    {
        $stub = (string) \file_get_contents(\dirname(__DIR__, 2) . '/stubs/ganesha_shm.stub.php');
        self::assertSame(1, \preg_match('/@return\s+array\{([^}]*)\}/', $stub, $match), 'the stub of ganesha_shm_info() gives the array shape');
        $documented = [];
        foreach (\explode(',', $match[1]) as $entry) {
            $entry = \trim(\preg_replace('/\s*\*\s*/', ' ', $entry));
            [$key, $type] = \array_map('trim', \explode(':', $entry, 2));
            $documented[$key] = $type;
        }

        // optional keys (`key?`) are there in a process whose ganesha_shm.path was refused
        $refused = Php::json(
            'echo json_encode(array_map("get_debug_type", ganesha_shm_info()));',
            ['ganesha_shm.path' => 'relative/path', 'display_startup_errors' => 0]
        );
        $required = \array_filter($documented, static fn (string $key) => !\str_ends_with($key, '?'), \ARRAY_FILTER_USE_KEY);
        $all = [];
        foreach ($documented as $key => $type) {
            $all[\rtrim($key, '?')] = $type;
        }

        $actual = [];
        foreach (\ganesha_shm_info() as $key => $value) {
            $actual[$key] = \get_debug_type($value);
        }

        \ksort($required);
        \ksort($all);
        \ksort($actual);
        \ksort($refused);
        self::assertSame($required, $actual);
        self::assertSame($all, $refused);
    }

    public function testTheDescriptionIsNotEmpty(): void
    {
        $class = self::$extension['classes']['Zeusi\\GaneshaShmAdapter\\AbstractSlidingTimeWindowShm'];
        self::assertTrue($class['abstract']);
        self::assertSame(['COUNT_TTL', 'DEFAULT_BUCKETS', 'MAX_BUCKETS', 'STATUS_TTL'], \array_keys($class['constants']));
        self::assertSame('60', $class['constants']['DEFAULT_BUCKETS']['value']);
        self::assertSame('86400', $class['constants']['COUNT_TTL']['value']);
        $methods = \array_keys($class['methods']);
        \sort($methods);
        self::assertSame(
            [
                '__construct', 'decrement', 'increment', 'load', 'loadLastFailureTime', 'loadStatus', 'metrics', 'reset', 'resetService',
                'save', 'saveLastFailureTime', 'saveStatus', 'setConfiguration', 'setContext', 'snapshot',
                'supportCountStrategy', 'supportRateStrategy',
            ],
            $methods
        );
        self::assertSame('?int', $class['methods']['loadLastFailureTime']['returnType']);
        self::assertSame(
            [
                'name' => 'bucketDuration',
                'type' => '?int',
                'allowsNull' => true,
                'optional' => true,
                'variadic' => false,
                'byReference' => false,
                'hasDefault' => true,
                'default' => 'NULL',
            ],
            $class['methods']['__construct']['parameters'][0]
        );
        self::assertSame(
            [
                'name' => 'clock',
                'type' => '?callable',
                'allowsNull' => true,
                'optional' => true,
                'variadic' => false,
                'byReference' => false,
                'hasDefault' => true,
                'default' => 'NULL',
            ],
            $class['methods']['__construct']['parameters'][1]
        );
        self::assertCount(2, $class['methods']['__construct']['parameters']);
        self::assertSame('bool', $class['methods']['supportCountStrategy']['returnType']);
        self::assertSame('array', self::$extension['functions']['ganesha_shm_info']['returnType']);
    }
}
