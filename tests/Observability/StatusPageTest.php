<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use Ackintosh\Ganesha\Builder;
use Ackintosh\Ganesha\Storage\StorageKeys;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The status page (examples/status), its JSON endpoint and the /metrics route
 * (examples/metrics.php), served by `php -S` with two workers sharing the extension's segment,
 * checked over HTTP and in headless Chromium; and the read-only promise of snapshot() and
 * metrics(): reading the circuits never takes the half-open trial.
 *
 * Needs Ganesha (skipped as the ganesha suite is without it), and for the browser tests
 * /usr/bin/chromium and GD. Set GANESHA_SHM_SCREENSHOT_DIR to keep the screenshots, and
 * GANESHA_SHM_DOCS_IMAGES to a directory (docs/images) to write there the documentation's picture
 * of the page, status-page.png.
 */
final class StatusPageTest extends TestCase
{
    /** Pixels of a colour that make "a substantial area": the OPEN badge alone is about 3,000. */
    private const BADGE_PIXELS = 2000;

    private ?BuiltInServer $server = null;
    private string $scratch = '';

    protected function setUp(): void
    {
        $missing = Autoload::ganeshaMissing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        $this->scratch = TempDir::create('ganesha-shm-status-');
    }

    protected function tearDown(): void
    {
        try {
            $this->server?->stop();
        } finally {
            $this->server = null;
            if ($this->scratch !== '') {
                TempDir::remove($this->scratch);
            }
        }
    }

    public function testTheServedPagesShowACircuitTrippedAcrossTheWorkers(): void
    {
        $browser = $this->browser();
        $server = $this->server = BuiltInServer::start($this->scratch);

        // One closed service first: green on the page, nothing in the open colour. The first
        // request is held in its worker while the second is sent, so the second is served by
        // the other worker and counts after the first one's worker started, before it counted.
        $held = $server->jsonLater('/simulate.php?service=search&outcome=success&hold_ms=1000');
        \usleep(300_000);
        $other = $this->simulate('search', 'success');
        $first = $held();
        self::assertNotSame($first['pid'], $other['pid'], 'the two requests were served by one worker process');
        self::assertSame(1, $other['snapshot']['successes']);
        self::assertSame(2, $first['snapshot']['successes'], 'every worker counts into the one shared store');
        for ($i = 3; $i <= 6; $i++) {
            self::assertSame($i, $this->simulate('search', 'success')['snapshot']['successes'], 'every worker counts into the one shared store');
        }
        $closed = $this->scratch . '/closed.png';
        $browser->screenshot($server->url . '/', $closed);
        $this->keep($closed);
        self::assertLessThan(50, self::pixelsNear($closed, self::cssColour('open')), 'no circuit is open, yet the page shows the OPEN colour');
        self::assertGreaterThan(self::BADGE_PIXELS, self::pixelsNear($closed, self::cssColour('closed')), 'the closed badge is not shown');

        // Trip "payments": three failures (minimumRequests 3, 100 % over a 50 % threshold),
        // one request each, spread over the workers; the fourth request is rejected.
        foreach ([1, 1, 1, 0] as $expectedAdmitted) {
            self::assertSame($expectedAdmitted, $this->simulate('payments', 'failure')['admitted']);
        }

        // (a) The JSON endpoint.
        $state = $server->json('/state.php');
        $payments = $state['services']['payments'] ?? null;
        self::assertIsArray($payments, 'state.php lists payments');
        self::assertSame('open', $payments['state']);
        self::assertFalse($payments['admits']);
        self::assertTrue($payments['tripped']);
        self::assertSame(3, $payments['failures']);
        self::assertSame(0, $payments['successes']);
        self::assertSame(1, $payments['rejections']);
        self::assertEquals(100, $payments['failure_rate']);
        self::assertEqualsWithDelta(\time(), $payments['last_failure_time'], 5);
        self::assertSame('closed', $state['services']['search']['state']);
        self::assertSame(6, $state['services']['search']['successes']);

        // (b) The /metrics route.
        $metrics = $server->get('/metrics');
        self::assertSame(200, $metrics['status']);
        self::assertStringStartsWith('text/plain; version=0.0.4', $metrics['headers']['content-type'] ?? '');
        self::assertMatchesRegularExpression('/^ganesha_shm_circuit_open\{service="payments"\} 1$/m', $metrics['body']);
        self::assertMatchesRegularExpression('/^ganesha_shm_circuit_open\{service="search"\} 0$/m', $metrics['body']);
        self::assertMatchesRegularExpression('/^ganesha_shm_tripped\{service="payments"\} 1$/m', $metrics['body']);
        self::assertMatchesRegularExpression('/^ganesha_shm_requests\{service="payments",outcome="failure"\} 3$/m', $metrics['body']);
        self::assertMatchesRegularExpression('/^ganesha_shm_requests\{service="search",outcome="success"\} 6$/m', $metrics['body']);

        // (c) The page in a browser: a red OPEN badge, and the DOM naming the service.
        $open = $this->scratch . '/open.png';
        $browser->screenshot($server->url . '/', $open);
        $this->keep($open);
        $openPixels = self::pixelsNear($open, self::cssColour('open'));
        self::assertGreaterThan(self::BADGE_PIXELS, $openPixels, "the open circuit's badge colour covers only {$openPixels} pixels");

        $dom = $browser->dumpDom($server->url . '/');
        self::assertMatchesRegularExpression(
            '{<tr class="row row-open" data-service="payments" data-state="open">.*?<span class="badge badge-open">OPEN</span>}s',
            $dom
        );
        self::assertMatchesRegularExpression('{data-service="search" data-state="closed">.*?>CLOSED</span>}s', $dom);
        self::assertStringContainsString('<title>(1 open) Ganesha circuits</title>', $dom);

        // (d) The page as the documentation shows it: more services, their requests over a few
        // seconds, some with failures under the threshold (40 % of 5 requests, 2 of 20), beside
        // the open one; in a window as wide as a reader's.
        foreach ([0 => ['inventory', 'success', 8], 1 => ['shipping', 'success', 5], 2 => ['recommendations', 'success', 3]] as [$service, $outcome, $count]) {
            self::assertSame($count, $this->simulate($service, $outcome, $count)['admitted']);
        }
        \sleep(1);
        $this->simulate('inventory', 'failure', 1);
        $this->simulate('recommendations', 'failure', 1);
        $this->simulate('search', 'success', 4);
        \sleep(1);
        $this->simulate('inventory', 'success', 10);
        $this->simulate('inventory', 'failure', 1);
        $this->simulate('shipping', 'success', 3);
        self::assertSame(1, $this->simulate('recommendations', 'failure', 1)['admitted']);
        $state = $server->json('/state.php')['services'];
        self::assertSame(['closed', 'closed', 'open', 'closed', 'closed'], \array_map(
            static fn (string $service): string => $state[$service]['state'],
            ['inventory', 'recommendations', 'payments', 'search', 'shipping'],
        ));
        self::assertEquals(40, $state['recommendations']['failure_rate']);
        self::assertEquals(10, $state['inventory']['failure_rate']);
        $page = $this->scratch . '/status-page.png';
        $browser->screenshot($server->url . '/', $page, 1200, 640);
        self::assertGreaterThan(self::BADGE_PIXELS, self::pixelsNear($page, self::cssColour('open')), 'the open badge is not shown');
        self::assertGreaterThan(4 * self::BADGE_PIXELS, self::pixelsNear($page, self::cssColour('closed')), 'the four closed badges are not shown');
        $this->keep($page);
        $docs = \getenv('GANESHA_SHM_DOCS_IMAGES');
        if (\is_string($docs) && $docs !== '') {
            if (!\is_dir($docs) && !\mkdir($docs, 0755, true)) {
                throw new \RuntimeException("GANESHA_SHM_DOCS_IMAGES={$docs}: could not create it");
            }
            self::assertTrue(\copy($page, $docs . '/status-page.png'), "could not write {$docs}/status-page.png");
        }
    }

    public function testReadingThePagesNeverTakesTheHalfOpenTrial(): void
    {
        $browser = $this->browser(gd: false);
        $server = $this->server = BuiltInServer::start($this->scratch);

        foreach ([1, 1, 1, 0] as $expectedAdmitted) {
            self::assertSame($expectedAdmitted, $this->simulate('payments', 'failure')['admitted']);
        }
        $state = $server->json('/state.php');
        self::assertSame('open', $state['services']['payments']['state']);
        $due = $state['services']['payments']['last_failure_time'] + $state['settings']['interval_to_half_open'];

        // Poll the JSON until the trial is due: every poll is a read that must not take it.
        $polls = 0;
        while (($state = $server->json('/state.php'))['services']['payments']['state'] !== 'half_open') {
            self::assertSame('open', $state['services']['payments']['state']);
            self::assertLessThan($due + 3, \time(), 'the half-open trial never became due');
            $polls++;
            \usleep(200_000);
        }
        self::assertGreaterThan(5, $polls);

        // Read everything, many times, while the trial is due; the browser runs the page's
        // script for 3 s of virtual time, so it also fetches the refreshed fragment.
        $dom = $browser->dumpDom($server->url . '/', virtualTimeMs: 3500);
        self::assertMatchesRegularExpression('{data-service="payments" data-state="half_open">.*?>HALF-OPEN</span>}s', $dom);
        self::assertStringContainsString('class="live ok"', $dom, "the page's script did not refresh it");
        for ($i = 0; $i < 5; $i++) {
            $page = $server->get('/');
            self::assertStringContainsString('data-service="payments" data-state="half_open"', $page['body']);
            self::assertStringContainsString('data-service="payments" data-state="half_open"', $server->get('/?fragment=1')['body']);
            $payments = $server->json('/state.php')['services']['payments'];
            self::assertSame('half_open', $payments['state']);
            self::assertTrue($payments['admits']);
            $metrics = $server->get('/metrics')['body'];
            self::assertMatchesRegularExpression('/^ganesha_shm_circuit_half_open\{service="payments"\} 1$/m', $metrics);
            self::assertMatchesRegularExpression('/^ganesha_shm_circuit_open\{service="payments"\} 0$/m', $metrics);
        }

        // Then Ganesha admits exactly one request, whichever worker asks.
        self::assertSame(1, $this->simulate('payments', 'none')['admitted'], 'the half-open trial was taken by a read');
        for ($i = 0; $i < 4; $i++) {
            $sent = $this->simulate('payments', 'none');
            self::assertSame(0, $sent['admitted'], 'a second request got through in the same interval');
            self::assertSame('open', $sent['snapshot']['state']);
        }
    }

    /**
     * The same promise in this process, with the real Builder: snapshot() and metrics(), called
     * many times while a trial is due, leave it to the next isAvailable(). A control service
     * shows the check would catch a read that claims: loadLastFailureTime() does.
     */
    public function testSnapshotAndMetricsNeverTakeTheHalfOpenTrial(): void
    {
        $adapter = new SlidingTimeWindowShm();
        $ganesha = Builder::withRateStrategy()
            ->adapter($adapter)
            ->timeWindow(30)
            ->failureRateThreshold(50)
            ->minimumRequests(3)
            ->intervalToHalfOpen(1)
            ->build();
        $read = Unique::name('obs.read.');
        $claimed = Unique::name('obs.claimed.');
        foreach ([$read, $claimed] as $service) {
            for ($i = 0; $i < 3; $i++) {
                self::assertTrue($ganesha->isAvailable($service));
                $ganesha->failure($service);
            }
            self::assertFalse($ganesha->isAvailable($service), "{$service} did not trip");
        }

        $deadline = \microtime(true) + 5.0;
        $reads = 0;
        do {
            $snapshot = $adapter->snapshot();
            $adapter->metrics();
            $reads++;
            self::assertLessThan($deadline, \microtime(true), 'the half-open trial never became due');
            \usleep(20_000);
        } while ($snapshot[$read]['state'] !== 'half_open' || $snapshot[$claimed]['state'] !== 'half_open');
        for ($i = 0; $i < 50; $i++) {
            $snapshot = $adapter->snapshot();
            $metrics = $adapter->metrics();
            self::assertSame('half_open', $snapshot[$read]['state']);
            self::assertTrue($snapshot[$read]['admits']);
            self::assertStringContainsString("ganesha_shm_circuit_half_open{service=\"{$read}\"} 1\n", $metrics);
        }
        self::assertGreaterThan(1, $reads);

        // Control: loadLastFailureTime() is the claiming read of Ganesha's half-open check, on
        // the key Ganesha's Storage gives it under a sliding window (the failure counter's).
        $adapter->loadLastFailureTime(StorageKeys::KEY_PREFIX . $claimed . StorageKeys::KEY_SUFFIX_FAILURE);
        self::assertSame('open', $adapter->snapshot()[$claimed]['state']);
        self::assertFalse($ganesha->isAvailable($claimed), 'control: a claiming read should have taken the trial');

        self::assertTrue($ganesha->isAvailable($read), 'the trial was taken by snapshot() or metrics()');
        self::assertFalse($ganesha->isAvailable($read), 'a second request got through in the same interval');
        self::assertSame('open', $adapter->snapshot()[$read]['state']);
    }

    public function testTheWindowChartShowsRecentFailuresAtItsRecentEnd(): void
    {
        $browser = $this->browser();
        $server = $this->server = BuiltInServer::start($this->scratch);
        self::assertSame(3, $this->simulate('recent', 'success', 3)['admitted']);
        \sleep(3);   // buckets of 1 s: the failures land 3 buckets to the right of the successes
        $this->simulate('recent', 'failure', 3);
        self::assertIsArray($server->json('/state.php')['services']['recent'] ?? null, 'state.php lists the service');

        $png = $this->scratch . '/window.png';
        $browser->screenshot($server->url . '/', $png);
        $this->keep($png);

        // The chart is the one area of its background colour (one service on the page).
        $background = self::whereNear($png, self::cssColour('chart-bg'));
        self::assertGreaterThan(500, \count($background), 'no window chart on the page');
        $xs = \array_column($background, 0);
        $ys = \array_column($background, 1);
        [$left, $right, $top, $bottom] = [\min($xs), \max($xs), \min($ys), \max($ys)];
        $inChart = static fn (array $points): array => \array_values(\array_filter(
            $points,
            static fn (array $p): bool => $p[0] >= $left && $p[0] <= $right && $p[1] >= $top && $p[1] <= $bottom,
        ));
        $failures = $inChart(self::whereNear($png, self::cssColour('chart-failure')));
        $successes = $inChart(self::whereNear($png, self::cssColour('chart-success')));
        self::assertNotSame([], $failures, 'the failures are not drawn');
        self::assertNotSame([], $successes, 'the successes are not drawn');
        $width = $right - $left;
        self::assertGreaterThanOrEqual($left + 0.85 * $width, \min(\array_column($failures, 0)), 'a failure is drawn away from the recent (right) end');
        self::assertLessThan(\min(\array_column($failures, 0)), \max(\array_column($successes, 0)), 'the earlier successes are drawn left of the failures');
        self::assertGreaterThanOrEqual($left + 0.5 * $width, \min(\array_column($successes, 0)), 'nothing happened in the older half of the window');
    }

    /** The browser, or the test is skipped saying what is missing. */
    private function browser(bool $gd = true): Chromium
    {
        $missing = Chromium::missing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        if ($gd && !\function_exists('imagecreatefrompng')) {
            self::markTestSkipped('GD is not loaded: the browser test decodes its screenshots with it (apt-get install php-gd; .ci/install-deps installs it)');
        }

        return new Chromium($this->scratch);
    }

    /** @return array<string, mixed> what simulate.php answered */
    private function simulate(string $service, string $outcome, int $count = 1): array
    {
        \assert($this->server !== null);

        return $this->server->json(\sprintf('/simulate.php?service=%s&outcome=%s&count=%d', \rawurlencode($service), $outcome, $count));
    }

    /** @return array{int, int, int} a colour the page's stylesheet declares, e.g. --open: #c62828 */
    private static function cssColour(string $name): array
    {
        $css = (string) \file_get_contents(\dirname(__DIR__, 2) . '/examples/status/index.php');
        if (\preg_match('/--' . \preg_quote($name, '/') . ':\s*#([0-9a-f]{6})\b/i', $css, $m) !== 1) {
            throw new \RuntimeException("examples/status/index.php declares no --{$name} colour");
        }

        return [\hexdec(\substr($m[1], 0, 2)), \hexdec(\substr($m[1], 2, 2)), \hexdec(\substr($m[1], 4, 2))];
    }

    /** Pixels of $png within 8 of $rgb on every channel. */
    private static function pixelsNear(string $png, array $rgb): int
    {
        return \count(self::whereNear($png, $rgb));
    }

    /**
     * Where the pixels of $png within 8 of $rgb on every channel are.
     *
     * @return list<array{int, int}> [x, y] of each
     */
    private static function whereNear(string $png, array $rgb): array
    {
        $image = \imagecreatefrompng($png);
        self::assertNotFalse($image, "{$png} is not a PNG");
        [$r, $g, $b] = $rgb;
        $found = [];
        $palette = !\imageistruecolor($image);
        for ($y = 0, $height = \imagesy($image); $y < $height; $y++) {
            for ($x = 0, $width = \imagesx($image); $x < $width; $x++) {
                $pixel = \imagecolorat($image, $x, $y);
                if ($palette) {
                    $c = \imagecolorsforindex($image, $pixel);
                    $pixel = ($c['red'] << 16) | ($c['green'] << 8) | $c['blue'];
                }
                if (\abs((($pixel >> 16) & 0xFF) - $r) <= 8 && \abs((($pixel >> 8) & 0xFF) - $g) <= 8 && \abs(($pixel & 0xFF) - $b) <= 8) {
                    $found[] = [$x, $y];
                }
            }
        }

        return $found;
    }

    /** Copies a screenshot to GANESHA_SHM_SCREENSHOT_DIR when that is set. */
    private function keep(string $png): void
    {
        $dir = \getenv('GANESHA_SHM_SCREENSHOT_DIR');
        if (\is_string($dir) && $dir !== '' && \is_dir($dir)) {
            $test = \method_exists($this, 'getName') ? $this->getName(false) : $this->name();
            \copy($png, $dir . '/' . $test . '-' . \basename($png));
        }
    }
}
