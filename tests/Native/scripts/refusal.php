<?php

/*
 * A refused call whose exception runs an autoloader, for RefusalTest (run under valgrind's
 * memcheck). Ganesha's StorageException is looked up (and so autoloaded) when the store refuses
 * a key; here a key too long. The autoloader either calls setContext() on the same adapter
 * (`reenter`) or ends in a fatal error (`fatal`), after which a shutdown function sets the
 * context again and makes the call once more. Prints, as JSON, what each step gave.
 *
 *   php refusal.php reenter|fatal METHOD
 */

declare(strict_types=1);

use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;

require dirname(__DIR__, 2) . '/Support/Autoload.php';
Zeusi\GaneshaShmAdapter\Tests\Support\Autoload::register(false);

[, $mode, $method] = $argv;
$context = FakeContext::make(60);
$adapter = new TestAdapter();
$adapter->setContext($context);
$tooLong = str_repeat('k', 4096);
$call = static fn () => match ($method) {
    'load' => $adapter->load($tooLong),
    'increment' => $adapter->increment($tooLong),
    'loadStatus' => $adapter->loadStatus($tooLong),
    'loadLastFailureTime' => $adapter->loadLastFailureTime($tooLong),
    'saveLastFailureTime' => $adapter->saveLastFailureTime($tooLong, 1_000_000),
    'saveStatus' => $adapter->saveStatus($tooLong, 1),
    'resetService' => $adapter->resetService($tooLong),
};
$outcome = static function (callable $step): string {
    try {
        $step();

        return 'ok';
    } catch (\Throwable $e) {
        return get_class($e) . ': ' . $e->getMessage();
    }
};
$report = ['autoloaded' => [], 'during_autoload' => null];

register_shutdown_function(static function () use (&$report, $adapter, $context, $call, $outcome): void {
    $report['after_shutdown_set_context'] = $outcome(static fn () => $adapter->setContext($context));
    $report['after_shutdown_call'] = $outcome($call);
    echo json_encode($report), "\n";
});
spl_autoload_register(static function (string $class) use (&$report, $mode, $adapter, $context, $outcome): void {
    $report['autoloaded'][] = $class;
    if ($mode === 'fatal') {
        trigger_error("fatal while loading {$class}", E_USER_ERROR);
    }
    $report['during_autoload'] = $outcome(static fn () => $adapter->setContext($context));
});

$report['call'] = $outcome($call);
