<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;

/**
 * The chaos soak of benches/web.sh for 20 s: nginx in front of php-fpm on a segment file, wrk
 * at 64 connections on one service, a random worker SIGKILLed every 200 ms and the master
 * reloaded every 5 s. The soak checks its own ledger (nothing counted is lost, the store holds
 * no more than was sent, every error is explained by a killed or reloaded worker, no hang, no
 * process left) and exits non-zero otherwise; this test also checks that the chaos happened.
 *
 * Needs Ganesha, nginx and wrk (.ci/install-deps installs both).
 */
final class ChaosSoakTest extends TestCase
{
    private const SECONDS = 20;

    public function testTwentySecondsOfKilledWorkersAndReloadsLoseNoCount(): void
    {
        $missing = Autoload::ganeshaMissing()
            ?? (\is_executable('/usr/sbin/nginx') ? null : 'nginx is not installed (apt-get install nginx)')
            ?? (\is_executable('/usr/bin/wrk') ? null : 'wrk is not installed (apt-get install wrk)');
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }

        $run = Command::run(
            ['bash', \dirname(__DIR__, 2) . '/benches/web.sh', '--chaos', '--duration', (string) self::SECONDS],
            env: Command::env(['GANESHA_SHM_EXT' => \GANESHA_SHM_EXT]),
            timeout: self::SECONDS + 90.0,
        );
        $ledger = $run['stdout'];
        self::assertSame(0, $run['exit'], "the soak failed its ledger:\n{$ledger}\n{$run['stderr']}");
        self::assertStringContainsString('web: chaos passed', $ledger);

        // The chaos happened: workers were killed, the master reloaded, requests were served.
        self::assertGreaterThanOrEqual(20, self::figure($ledger, 'workers SIGKILLed'), $ledger);
        self::assertGreaterThanOrEqual(2, self::figure($ledger, 'master reloads (SIGUSR2)'), $ledger);
        self::assertGreaterThan(1000, self::figure($ledger, 'answered "counted"'), $ledger);
        \preg_match('/^web: chaos ledger.*?(?=^  ok )/ms', $ledger, $m);
        \fwrite(\STDERR, 'fpm: ' . \preg_replace('/\s+/', ' ', \trim(\substr($m[0] ?? '', 5))) . "\n");
    }

    private static function figure(string $ledger, string $label): int
    {
        if (\preg_match('/^  ' . \preg_quote($label, '/') . '\s+(\d+)$/m', $ledger, $m) !== 1) {
            self::fail("the ledger has no line '{$label}':\n{$ledger}");
        }

        return (int) $m[1];
    }
}
