<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use Ackintosh\Ganesha\Builder;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * metrics() checked by Prometheus's own linter, `promtool check metrics` (Debian's prometheus
 * package; Debian 13 ships it as promtool), for service names that the exposition format must
 * escape or that are not text at all.
 */
final class PromtoolTest extends TestCase
{
    public function testTheExpositionOfAwkwardNamesPassesPromtool(): void
    {
        $missing = Autoload::ganeshaMissing() ?? (\is_executable('/usr/bin/promtool') ? null : 'promtool is not installed (apt-get install prometheus)');
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        $adapter = new SlidingTimeWindowShm();
        $ganesha = Builder::withRateStrategy()
            ->adapter($adapter)
            ->timeWindow(60)
            ->failureRateThreshold(50)
            ->minimumRequests(2)
            ->intervalToHalfOpen(5)
            ->build();
        $base = Unique::name('promtool.');
        $names = ["\xff", "\xfe", $base . "\xff", 'say "hi"', 'back\\slash', "new\nline", '', '\\xFF', 'tab	é', $base];
        foreach ($names as $service) {
            $ganesha->failure($service);
            $ganesha->success($service);
        }
        $metrics = $adapter->metrics();

        $check = Command::run(['/usr/bin/promtool', 'check', 'metrics'], input: $metrics);
        self::assertSame(0, $check['exit'], "promtool check metrics:\n{$check['stdout']}{$check['stderr']}\n{$metrics}");
        self::assertSame('', \trim($check['stdout'] . $check['stderr']), 'promtool reported problems');

        $series = \preg_match_all('/^ganesha_shm_requests\{service="(?:[^"\\\\]|\\\\.)*",outcome="failure"\} 1$/m', $metrics);
        self::assertGreaterThanOrEqual(\count($names), $series, 'a series per service');
        self::assertCount(\count($names), \array_filter(
            $adapter->snapshot(),
            static fn (array $row): bool => \in_array($row['service'], $names, true),
        ), 'every name is a service of its own in the snapshot');
    }
}
