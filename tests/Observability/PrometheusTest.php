<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * A real Prometheus (Debian's) scraping the /metrics route (examples/metrics.php) of `php -S`
 * every second: it reads the open circuit and the trip, and the `_total` counters do not go
 * back when the server and its workers are restarted on the same segment file.
 */
final class PrometheusTest extends TestCase
{
    private ?BuiltInServer $server = null;
    private ?PrometheusServer $prometheus = null;
    private string $scratch = '';

    protected function setUp(): void
    {
        $missing = Autoload::ganeshaMissing() ?? PrometheusServer::missing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        $this->scratch = TempDir::create('ganesha-shm-prometheus-');
    }

    protected function tearDown(): void
    {
        try {
            $this->prometheus?->stop();
            $this->server?->stop();
        } finally {
            $this->prometheus = $this->server = null;
            if ($this->scratch !== '') {
                TempDir::remove($this->scratch);
            }
        }
    }

    public function testPrometheusSeesTheTripAndCountersThatSurviveARestart(): void
    {
        $ini = ['ganesha_shm.path' => $this->scratch . '/segment'];
        $server = $this->server = BuiltInServer::start($this->scratch, $ini);
        $port = (int) \substr((string) \strrchr($server->url, ':'), 1);
        $prometheus = $this->prometheus = PrometheusServer::start($this->scratch, '127.0.0.1:' . $port);

        // A healthy service first, so that Prometheus has seen its counters at 0 before the trip.
        $server->json('/simulate.php?service=payments&outcome=success&count=1');
        $trips = 'ganesha_shm_trips_total{service="payments"}';
        self::assertSame(0.0, $prometheus->waitFor($trips, static fn (?float $v): bool => $v !== null), "no scrape of {$trips}:\n" . $prometheus->log());

        // Trip it: three failures over minimumRequests 3, then a rejected request.
        $server->json('/simulate.php?service=payments&outcome=failure&count=4');
        $open = $prometheus->waitFor('ganesha_shm_circuit_open{service="payments"}', static fn (?float $v): bool => $v === 1.0);
        self::assertSame(1.0, $open, 'Prometheus reads the circuit open');
        $increase = $prometheus->waitFor("increase({$trips}[1m])", static fn (?float $v): bool => $v !== null && $v >= 1.0);
        self::assertGreaterThanOrEqual(1.0, $increase, 'Prometheus sees the trip in the counter');
        $totals = $server->json('/state.php')['services']['payments']['totals'];
        self::assertSame(1, $totals['trips']);
        $failures = 'ganesha_shm_requests_total{service="payments",outcome="failure"}';
        $rejections = 'ganesha_shm_requests_total{service="payments",outcome="rejection"}';
        self::assertSame((float) $totals['failures'], $prometheus->waitFor($failures, static fn (?float $v): bool => $v === (float) $totals['failures']));
        self::assertSame((float) $totals['rejections'], $prometheus->waitFor($rejections, static fn (?float $v): bool => $v === (float) $totals['rejections']));

        // The server and its workers restarted on the same segment file and port.
        $server->stop();
        $this->server = null;
        $server = $this->server = BuiltInServer::start($this->scratch, $ini, $port);
        $server->json('/simulate.php?service=payments&outcome=none&count=1');   // rejected: one more request counted
        $after = (float) ($totals['rejections'] + 1);
        self::assertSame($after, $prometheus->waitFor($rejections, static fn (?float $v): bool => $v === $after), 'a scrape after the restart');
        self::assertSame(1.0, $prometheus->query($trips), 'the trip counter kept its value');
        self::assertSame((float) $totals['failures'], $prometheus->query($failures));
        self::assertSame(0.0, $prometheus->query("resets({$trips}[5m])"), 'the counter never went back');
        self::assertSame(0.0, $prometheus->query("resets({$failures}[5m])"));
    }
}
