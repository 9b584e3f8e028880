<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;

/**
 * A refused call (here a key too long; a full store does the same) throws Ganesha's
 * StorageException, whose class PHP may have to autoload: the first refusal in a process is
 * exactly when Composer's autoloader loads it. That autoloader is PHP code. It may call the
 * adapter back (setContext() included) and it may end in a fatal error, whose bailout must not
 * cross the adapter's Rust frames while they hold the configuration. Every hot method and a
 * generated one (resetService()) are run under valgrind's memcheck, each in a process of its
 * own (scripts/refusal.php).
 */
final class RefusalTest extends TestCase
{
    private const METHODS = ['load', 'increment', 'loadStatus', 'loadLastFailureTime', 'saveLastFailureTime', 'saveStatus', 'resetService'];

    /** @return iterable<string, array{string}> */
    public static function methods(): iterable
    {
        foreach (self::METHODS as $method) {
            yield $method => [$method];
        }
    }

    /**
     * @dataProvider methods
     */
    #[DataProvider('methods')]
    public function testAnAutoloaderCallingSetContextWhileTheRefusalIsThrownSucceeds(string $method): void
    {
        $report = self::runRefusal('reenter', $method);

        self::assertSame(['Ackintosh\Ganesha\Exception\StorageException'], \array_unique($report['autoloaded']));
        self::assertSame('ok', $report['during_autoload'], 'setContext() from the autoloader');
        self::assertStringStartsWith('RuntimeException: ganesha_shm: a key of', $report['call'], 'the refusal is thrown, as StorageException\'s parent without Ganesha');
        self::assertSame('ok', $report['after_shutdown_set_context']);
    }

    /**
     * @dataProvider methods
     */
    #[DataProvider('methods')]
    public function testAnAutoloaderEndingInAFatalErrorLeavesTheAdapterUsable(string $method): void
    {
        $report = self::runRefusal('fatal', $method);

        self::assertArrayNotHasKey('call', $report, 'the fatal error ended the script in the call');
        self::assertSame('ok', $report['after_shutdown_set_context'], 'setContext() in a shutdown function, after the bailout');
        self::assertStringStartsWith('RuntimeException: ganesha_shm: a key of', $report['after_shutdown_call']);
    }

    /** @return array<string, mixed> */
    private static function runRefusal(string $mode, string $method): array
    {
        $run = Php::underMemcheck([__DIR__ . '/scripts/refusal.php', $mode, $method]);
        if ($run === null) {
            self::markTestSkipped('valgrind is not installed (apt-get install valgrind; .ci/install-deps installs it)');
        }
        // A fatal error exits with 255; memcheck's own errors with 99.
        self::assertNotSame(99, $run['exit'], "memcheck:\n{$run['stderr']}");
        self::assertSame($mode === 'fatal' ? 255 : 0, $run['exit'], "{$run['stderr']}\n{$run['stdout']}");

        return \json_decode($run['stdout'], true, 512, \JSON_THROW_ON_ERROR);
    }
}
