<?php

/**
 * Status page of the Ganesha circuits kept by the ganesha_shm extension: every service with
 * data in the shared-memory store, its state (closed, open, half-open), its counts over the
 * current time window, its failure rate and last failure, refreshed every second.
 *
 * Read-only: it calls SlidingTimeWindowShm::snapshot(), which never claims the half-open
 * trial, so opening this page (or scraping /metrics) never changes what Ganesha decides next.
 *
 * The page is rendered here in full, so that it reads without JavaScript; its script fetches
 * `?fragment=1` (the circuits section alone) every second and swaps it in. state.php gives the
 * same figures as JSON.
 *
 * Run (from the package root):
 *   PHP_CLI_SERVER_WORKERS=2 php -d extension=$PWD/target/release/libganesha_shm.so \
 *       -S 127.0.0.1:8080 -t examples/status examples/status/router.php
 * and open http://127.0.0.1:8080/
 */

declare(strict_types=1);

$now = time();
$error = null;
$services = [];
$settings = [];
$info = [];
try {
    ['adapter' => $adapter, 'settings' => $settings] = require __DIR__ . '/ganesha.php';
    $services = $adapter->snapshot(true);
    $info = ganesha_shm_info();
} catch (Throwable $e) {
    $error = $e;
    http_response_code(500);
}

// Open circuits first, then half-open, then closed; by name within each.
$rank = ['open' => 0, 'half_open' => 1, 'closed' => 2];
uasort($services, static fn (array $a, array $b): int => [$rank[$a['state']] ?? 3, $a['display_name']] <=> [$rank[$b['state']] ?? 3, $b['display_name']]);

$h = static fn (mixed $value): string => htmlspecialchars((string) $value, ENT_QUOTES | ENT_SUBSTITUTE, 'UTF-8');

$ago = static function (?int $time) use ($now): string {
    if ($time === null) {
        return '—';
    }
    $seconds = max(0, $now - $time);

    return match (true) {
        $seconds < 60 => $seconds . ' s ago',
        $seconds < 3600 => intdiv($seconds, 60) . ' min ' . ($seconds % 60) . ' s ago',
        default => intdiv($seconds, 3600) . ' h ' . intdiv($seconds % 3600, 60) . ' min ago',
    };
};

// A service's window as a small chart, inline SVG drawn here (no script): one column per
// bucket, oldest on the left, failures stacked under rejections under successes, scaled to the
// busiest bucket.
$chart = static function (array $buckets) use ($h): string {
    $width = 120;
    $height = 32;
    $count = count($buckets);
    if ($count === 0) {
        return '—';
    }
    $slot = $width / $count;
    $gap = $slot >= 3 ? 1 : 0;
    $busiest = max(1, ...array_map(static fn (array $b): int => $b['failures'] + $b['rejections'] + $b['successes'], $buckets));
    $svg = sprintf(
        '<svg class="window" width="%1$d" height="%2$d" viewBox="0 0 %1$d %2$d" role="img" aria-label="%3$s"><rect class="window-bg" width="%1$d" height="%2$d"/>',
        $width,
        $height,
        $h(sprintf('%d buckets of %d s, oldest on the left', $count, $count > 1 ? $buckets[1]['start'] - $buckets[0]['start'] : 0)),
    );
    foreach ($buckets as $i => $bucket) {
        $top = $height;
        foreach (['failures' => 'failure', 'rejections' => 'rejection', 'successes' => 'success'] as $field => $class) {
            $bar = $bucket[$field] / $busiest * $height;
            if ($bar <= 0) {
                continue;
            }
            $top -= $bar;
            $svg .= sprintf(
                '<rect class="w-%s" x="%.2f" y="%.2f" width="%.2f" height="%.2f"><title>%s</title></rect>',
                $class,
                $i * $slot,
                $top,
                $slot - $gap,
                $bar,
                $h(sprintf('%s: %d failures, %d successes, %d rejections', date('H:i:s', $bucket['start']), $bucket['failures'], $bucket['successes'], $bucket['rejections'])),
            );
        }
    }

    return $svg . '</svg>';
};

$renderCircuits = static function () use ($services, $settings, $info, $error, $now, $h, $ago, $chart): string {
    $labels = ['open' => 'OPEN', 'half_open' => 'HALF-OPEN', 'closed' => 'CLOSED'];
    $counts = ['open' => 0, 'half_open' => 0, 'closed' => 0];
    foreach ($services as $service) {
        $counts[$service['state']] = ($counts[$service['state']] ?? 0) + 1;
    }
    $open = array_column(array_filter($services, static fn (array $s): bool => $s['state'] === 'open'), 'display_name');

    ob_start();
    if ($error !== null) { ?>
        <div class="alert alert-error" role="alert">
            <strong>The circuits cannot be read:</strong> <?= $h($error->getMessage()) ?>
        </div>
    <?php } else { ?>
        <div class="summary" data-open="<?= $counts['open'] ?>" data-half-open="<?= $counts['half_open'] ?>">
            <span class="count count-open"><?= $counts['open'] ?> open</span>
            <span class="count count-half_open"><?= $counts['half_open'] ?> half-open</span>
            <span class="count count-closed"><?= $counts['closed'] ?> closed</span>
        </div>
        <?php if ($open !== []) { ?>
            <div class="alert alert-open" role="alert">
                <?= count($open) === 1 ? 'Circuit open' : count($open) . ' circuits open' ?>:
                <strong><?= $h(implode(', ', $open)) ?></strong>: requests are rejected; one trial
                request is let through <?= $h($settings['interval_to_half_open'] ?? '?') ?> s after the last failure.
            </div>
        <?php } ?>
        <?php if ($services === []) { ?>
            <p class="empty">No service has data in the store yet: circuits appear here once the
                application calls Ganesha for them.</p>
        <?php } else { ?>
            <table>
                <thead>
                <tr>
                    <th>Service</th>
                    <th>State</th>
                    <th>Failure rate</th>
                    <th>Window <span class="legend"><i class="key w-failure"></i>failures <i class="key w-rejection"></i>rejections <i class="key w-success"></i>successes</span></th>
                    <th class="num">Failures</th>
                    <th class="num">Successes</th>
                    <th class="num">Rejections</th>
                    <th>Last failure</th>
                </tr>
                </thead>
                <tbody>
                <?php foreach ($services as $service) {
                    $state = (string) $service['state'];
                    $rate = $service['failure_rate'];
                    ?>
                    <tr class="row row-<?= $h($state) ?>" data-service="<?= $h($service['display_name']) ?>" data-state="<?= $h($state) ?>">
                        <td class="service"><?= $h($service['display_name']) ?></td>
                        <td>
                            <span class="badge badge-<?= $h($state) ?>"><?= $h($labels[$state] ?? strtoupper($state)) ?></span>
                            <?php if ($state === 'half_open') { ?>
                                <div class="note">next request is the trial</div>
                            <?php } ?>
                            <?php if ($service['tripped']) { ?>
                                <div class="note tripped">tripped</div>
                            <?php } ?>
                            <?php if (($service['fleet']['only'] ?? false) === true) { ?>
                                <div class="note fleet" title="other hosts count it, this one has not yet">seen only through the fleet</div>
                            <?php } ?>
                            <?php if (($service['totals']['trips'] ?? 0) > 0) { ?>
                                <div class="note trips"><?= $h($service['totals']['trips']) ?> trip<?= $service['totals']['trips'] === 1 ? '' : 's' ?> in all</div>
                            <?php } ?>
                        </td>
                        <td>
                            <?php if ($rate === null) { ?>
                                —
                            <?php } else { ?>
                                <div class="rate">
                                    <span class="rate-value"><?= $h(rtrim(rtrim(number_format((float) $rate, 1, '.', ''), '0'), '.')) ?> %</span>
                                    <span class="bar" title="threshold <?= $h($settings['failure_rate_threshold'] ?? '?') ?> %">
                                        <span class="fill<?= $rate >= ($settings['failure_rate_threshold'] ?? 101) ? ' over' : '' ?>" style="width: <?= $h(min(100, max(0, (float) $rate))) ?>%"></span>
                                        <?php if (isset($settings['failure_rate_threshold'])) { ?>
                                            <span class="threshold" style="left: <?= $h($settings['failure_rate_threshold']) ?>%"></span>
                                        <?php } ?>
                                    </span>
                                </div>
                            <?php } ?>
                        </td>
                        <td class="chart"><?= $chart($service['buckets'] ?? []) ?></td>
                        <?php foreach (['failures', 'successes', 'rejections'] as $count) { ?>
                            <td class="num">
                                <?= $h($service[$count] ?? '—') ?>
                                <?php if (is_array($service['fleet'] ?? null)) { ?>
                                    <div class="note fleet<?= $service['fleet']['decides'] ? ' decides' : '' ?>" title="every host of the fleet, this one included<?= $service['fleet']['decides'] ? ': these decide' : '' ?>">fleet <?= $h($service['fleet'][$count]) ?></div>
                                <?php } ?>
                            </td>
                        <?php } ?>
                        <td>
                            <?php if ($service['last_failure_time'] === null) { ?>
                                —
                            <?php } else { ?>
                                <span title="<?= $h(date('Y-m-d H:i:s T', $service['last_failure_time'])) ?>"><?= $h($ago($service['last_failure_time'])) ?></span>
                                <div class="note"><?= $h(date('H:i:s', $service['last_failure_time'])) ?></div>
                            <?php } ?>
                        </td>
                    </tr>
                <?php } ?>
                </tbody>
            </table>
        <?php } ?>
        <p class="footer">
            Updated <?= $h(date('H:i:s', $now)) ?> by worker pid <?= getmypid() ?> ·
            store: room for <?= $h($info['max_services'] ?? '?') ?> services,
            <?= $h($info['counter_slots_used'] ?? '?') ?> of <?= $h($info['counter_slots'] ?? '?') ?> counter slots and
            <?= $h($info['status_slots_used'] ?? '?') ?> of <?= $h($info['status_slots'] ?? '?') ?> status slots in use,
            <?= $h(round(($info['segment_bytes'] ?? 0) / 1048576, 1)) ?> MiB segment,
            ganesha_shm <?= $h($info['version'] ?? '?') ?>
            <?php if (array_key_exists('fleet_attached', $info)) { ?>
                · fleet mode:
                <?php if ($info['fleet_attached'] === 1) { ?>
                    <span class="fleet-state">attached, last sync <?= $h(number_format($info['fleet_sync_age_ms'] / 1000, 1)) ?> s ago, <?= $h($info['fleet_hosts']) ?> hosts</span>
                <?php } else { ?>
                    <span class="fleet-state">not attached (this host decides alone)</span>
                <?php } ?>
                , <?= $h($info['fleet_sync_errors']) ?> sync errors
            <?php } ?>
        </p>
    <?php }

    return (string) ob_get_clean();
};

header('Cache-Control: no-store');
if (isset($_GET['fragment'])) {
    header('Content-Type: text/html; charset=utf-8');
    echo $renderCircuits();

    return;
}

$openCount = count(array_filter($services, static fn (array $s): bool => $s['state'] === 'open'));
?>
<!DOCTYPE html>
<html lang="en">
<head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title><?= $openCount > 0 ? "({$openCount} open) " : '' ?>Ganesha circuits</title>
    <noscript><meta http-equiv="refresh" content="2"></noscript>
    <style>
        :root { --open: #c62828; --half-open: #f9a825; --closed: #2e7d32; --ink: #1f2328; --muted: #59636e; --line: #d8dee4;
                --chart-bg: #e3f2fd; --chart-failure: #b71c1c; --chart-rejection: #8c959f; --chart-success: #66bb6a; }
        * { box-sizing: border-box; }
        body { margin: 0; padding: 24px 32px; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--ink); background: #f6f8fa; }
        header { display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; margin-bottom: 4px; }
        h1 { margin: 0; font-size: 24px; }
        .live { font-size: 13px; color: var(--muted); }
        .live::before { content: ""; display: inline-block; width: 8px; height: 8px; border-radius: 50%; margin-right: 6px; background: #8c959f; vertical-align: 1px; }
        .live.ok::before { background: var(--closed); }
        .live.down { color: #8e1c1c; font-weight: 600; }
        .settings { margin: 0 0 16px; color: var(--muted); font-size: 13px; }
        .summary { display: flex; gap: 8px; margin-bottom: 12px; }
        .count { padding: 2px 10px; border-radius: 12px; background: #eaeef2; font-size: 13px; font-weight: 600; }
        .alert { padding: 10px 14px; margin-bottom: 14px; border-radius: 4px; }
        .alert-open { background: #fdecea; border-left: 6px solid var(--open); color: #8e1c1c; }
        .alert-error { background: #fdecea; border: 1px solid #e5a5a5; color: #8e1c1c; }
        table { width: 100%; border-collapse: collapse; background: #fff; border: 1px solid var(--line); }
        th, td { padding: 10px 8px; text-align: left; border-bottom: 1px solid var(--line); vertical-align: middle; }
        th { white-space: nowrap; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); background: #f6f8fa; }
        td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
        .row-open { background: #fff5f5; }
        .row-half_open { background: #fffbea; }
        .service { font-weight: 600; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
        .badge { display: inline-block; min-width: 92px; padding: 6px 12px; border-radius: 4px; text-align: center; font-weight: 700; font-size: 14px; letter-spacing: .06em; }
        .badge-open { background: var(--open); color: #fff; }
        .badge-half_open { background: var(--half-open); color: #1f2328; }
        .badge-closed { background: var(--closed); color: #fff; }
        .note { font-size: 12px; color: var(--muted); margin-top: 2px; }
        .rate { display: flex; align-items: center; gap: 8px; }
        .rate-value { white-space: nowrap; min-width: 52px; text-align: right; font-variant-numeric: tabular-nums; }
        .bar { position: relative; display: inline-block; width: 60px; height: 8px; background: #eaeef2; border-radius: 4px; }
        .fill { position: absolute; left: 0; top: 0; bottom: 0; border-radius: 4px; background: #8c959f; }
        .fill.over { background: #e57373; }
        .threshold { position: absolute; top: -3px; bottom: -3px; width: 2px; background: var(--ink); }
        .tripped { font-weight: 700; color: #8e1c1c; }
        .empty { padding: 16px; background: #fff; border: 1px dashed var(--line); color: var(--muted); }
        .footer { margin-top: 14px; font-size: 12px; color: var(--muted); }
        .window { display: block; }
        .window-bg { fill: var(--chart-bg); }
        .w-failure { fill: var(--chart-failure); background: var(--chart-failure); }
        .w-rejection { fill: var(--chart-rejection); background: var(--chart-rejection); }
        .w-success { fill: var(--chart-success); background: var(--chart-success); }
        .legend { display: block; font-size: 10px; text-transform: none; letter-spacing: 0; font-weight: 400; }
        .key { display: inline-block; width: 8px; height: 8px; margin: 0 2px 0 4px; }
    </style>
</head>
<body>
<header>
    <h1>Ganesha circuits</h1>
    <span id="live" class="live">refreshes every second</span>
</header>
<?php if ($settings !== []) { ?>
    <p class="settings">
        <?= $h(ucfirst($settings['strategy'])) ?> strategy · time window <?= $h($settings['time_window']) ?> s ·
        trips at <?= $h($settings['failure_rate_threshold']) ?> % failures over at least <?= $h($settings['minimum_requests']) ?> requests ·
        one trial <?= $h($settings['interval_to_half_open']) ?> s after the last failure
    </p>
<?php } ?>
<main id="circuits"><?= $renderCircuits() ?></main>
<script>
    (function () {
        var circuits = document.getElementById('circuits');
        var live = document.getElementById('live');
        var last = null;
        function poll() {
            fetch('?fragment=1', {cache: 'no-store'})
                .then(function (response) {
                    return response.text().then(function (html) {
                        if (html !== last) {
                            circuits.innerHTML = html;
                            last = html;
                        }
                        var summary = circuits.querySelector('.summary');
                        var open = summary ? Number(summary.getAttribute('data-open')) : 0;
                        document.title = (open > 0 ? '(' + open + ' open) ' : '') + 'Ganesha circuits';
                        live.textContent = response.ok ? 'live, refreshes every second' : 'error ' + response.status;
                        live.className = response.ok ? 'live ok' : 'live down';
                    });
                })
                .catch(function () {
                    live.textContent = 'disconnected: retrying';
                    live.className = 'live down';
                })
                .then(function () { setTimeout(poll, 1000); });
        }
        setTimeout(poll, 1000);
    })();
</script>
</body>
</html>
