<?php

/*
 * The configurations of ConfigurationTest, run under valgrind's memcheck: for each case of
 * configuration_cases.php, what Ganesha's getter of the setting gives, and what the adapter
 * does with a Context of that configuration beside what it does with the int the getter
 * returned stored instead. Prints, as JSON, by case:
 *  - getter: what the getter threw (its class and message) and the errors it raised;
 *  - actual: what setContext() threw (with its previous exception) and raised, and what the
 *    adapter then shows of a service: its snapshot row's buckets, state and failure rate;
 *  - reference: the same for the int the getter returned, or, for an optional setting that is
 *    not set (null, as Ganesha's own isset() checks tell), for a configuration without it; null when
 *    the getter threw.
 *
 *   php configuration.php
 */

declare(strict_types=1);

// PCRE's JIT compiles code that memcheck cannot follow, and reports reads it makes on purpose.
ini_set('pcre.jit', '0');

use Ackintosh\Ganesha\Configuration;
use Ackintosh\Ganesha\Context;
use Ackintosh\Ganesha\Strategy\Count;
use Ackintosh\Ganesha\Strategy\Rate;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;

require dirname(__DIR__, 2) . '/Support/Autoload.php';
$missing = Zeusi\GaneshaShmAdapter\Tests\Support\Autoload::register(true);
if ($missing !== null) {
    fwrite(STDERR, $missing);
    exit(3);
}
$cases = require __DIR__ . '/configuration_cases.php';

const TIME = 1_800_000_000;
// Settings the adapter goes without: the thresholds (it reads them for snapshot()) and the
// interval to half-open (it claims the trial by it), as Ganesha's own adapters, which read none.
const OPTIONAL = ['failureRateThreshold', 'minimumRequests', 'failureCountThreshold', 'intervalToHalfOpen'];

/**
 * What `$call` returned or threw (with the exception's previous one), and the errors PHP raised.
 *
 * @return array{result: mixed, thrown: list<string>|null, errors: list<array{int, string}>}
 */
function outcome(callable $call): array
{
    $errors = [];
    set_error_handler(static function (int $level, string $message) use (&$errors): bool {
        $errors[] = [$level, $message];

        return true;
    });
    try {
        return ['result' => $call(), 'thrown' => null, 'errors' => $errors];
    } catch (Throwable $e) {
        $thrown = [get_class($e), $e->getMessage()];
        if ($e->getPrevious() !== null) {
            array_push($thrown, get_class($e->getPrevious()), $e->getPrevious()->getMessage());
        }

        return ['result' => null, 'thrown' => $thrown, 'errors' => $errors];
    } finally {
        restore_error_handler();
    }
}

/**
 * The adapter given a Context of `$params`: what setContext() threw and raised, then what
 * it shows of a service with 3 failures and 1 success, its last failure 6 seconds ago.
 *
 * @param array<string, mixed> $params
 * @return array{thrown: list<string>|null, errors: list<array{int, string}>, observed: mixed}
 */
function observe(string $strategy, array $params): array
{
    static $services = 0;
    $adapter = new SlidingTimeWindowShm(bucketDuration: 1, clock: static fn (): int => TIME);
    $context = new Context($strategy === 'rate' ? Rate::class : Count::class, $adapter, new Configuration($params));
    $set = outcome(static fn () => $adapter->setContext($context));
    if ($set['thrown'] !== null) {
        return ['thrown' => $set['thrown'], 'errors' => $set['errors'], 'observed' => null];
    }
    $service = 'configuration_' . ++$services;
    foreach (['failure', 'failure', 'failure', 'success'] as $counter) {
        $adapter->increment("ganesha_{$service}_{$counter}");
    }
    $adapter->saveLastFailureTime("ganesha_{$service}_failure", TIME - 6);
    $row = outcome(static fn () => $adapter->snapshot(buckets: true)[$service]);
    $observed = $row['thrown'] ?? [
        count($row['result']['buckets'] ?? []),
        $row['result']['state'],
        $row['result']['admits'],
        $row['result']['failure_rate'],
    ];

    return ['thrown' => null, 'errors' => $set['errors'], 'observed' => $observed];
}

$report = [];
foreach ($cases as $name => [$strategy, $setting, $params]) {
    $getter = outcome(static fn () => (new Configuration($params))->{$setting}());
    $reference = null;
    if (in_array($setting, OPTIONAL, true) && $params[$setting] === null) {
        $reference = observe($strategy, array_diff_key($params, [$setting => true]));
    } elseif ($getter['thrown'] === null) {
        $reference = observe($strategy, [$setting => $getter['result']] + $params);
    }
    $report[$name] = [
        'getter' => ['thrown' => $getter['thrown'], 'errors' => $getter['errors']],
        'actual' => observe($strategy, $params),
        'reference' => $reference,
    ];
}

echo json_encode($report, JSON_THROW_ON_ERROR | JSON_INVALID_UTF8_SUBSTITUTE), "\n";
