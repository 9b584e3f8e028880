<?php

/*
 * A bar chart (SVG) of what benches/web.sh printed: each endpoint's req/s ÷ the req/s of Ganesha
 * over the do-nothing adapter, by connections, a panel for each table (one service; 1,000
 * services), with a line at 1.
 *
 *   bash benches/web.sh | tee web.txt
 *   php benches/chart.php web.txt web.svg        (or: php benches/chart.php < web.txt > web.svg)
 *
 * It reads web.sh's own output, its other lines skipped: each table whose header has the columns
 * "connections", "endpoint" and "req/s ÷ do-nothing", captioned by the line before it; the run's
 * line "N workers (pm=static), S s a run, medians of R rounds", and web.sh's lines naming the
 * servers and the machine, when there, go under the title. Nothing else is written on the chart:
 * a date or a machine web.sh did not print is not made up. Exits 1, saying why, when the input
 * has no such table or a row that does not read.
 */

declare(strict_types=1);

const RATIO_COLUMN = 'req/s ÷ do-nothing';
// Colours by endpoint as report.php names them (Okabe and Ito's palette, told apart by people
// with colour blindness), the floors in greys; an endpoint of another name takes the next spare.
const COLOURS = [
    'plain PHP, no Ganesha' => '#b0b0b0',
    'Ganesha, do-nothing adapter' => '#6e6e6e',
    'SlidingTimeWindowShm' => '#0072b2',
    'SlidingTimeWindowShm, fleet mode' => '#56b4e9',
    'Ganesha Apcu' => '#e69f00',
    'Ganesha Redis' => '#d55e00',
];
const SPARE_COLOURS = ['#009e73', '#cc79a7', '#f0e442', '#000000'];

/** @param list<string> $lines */
function parse(array $lines): array
{
    $tables = [];
    $notes = [];
    $caption = null;
    for ($i = 0, $n = count($lines); $i < $n; $i++) {
        $line = rtrim($lines[$i]);
        if (preg_match('/^\d+ workers \(pm=static\), .* a run, medians of \d+ rounds?$/', $line) === 1) {
            $notes[] = $line;
        } elseif (preg_match('/^web: nginx on [^,]+, (.*)$/', $line, $m) === 1) {
            $notes[] = 'nginx, ' . $m[1];   // the port is no news
        } elseif (preg_match('/^web: run of (.*)$/', $line, $m) === 1) {
            $notes[] = $m[1];
        }
        if (!str_starts_with($line, '|')) {
            if (trim($line) !== '' && !str_starts_with($line, 'web: ')) {
                $caption = trim($line);
            }
            continue;
        }
        $header = cells($line);
        $columns = array_flip($header);
        if (!isset($columns['connections'], $columns['endpoint'], $columns[RATIO_COLUMN])) {
            // another table (fleet mode ÷ local shm): skipped with its rows
            while ($i + 1 < $n && str_starts_with($lines[$i + 1], '|')) {
                $i++;
            }
            continue;
        }
        $rows = [];
        $i++;   // the |---| line
        while ($i + 1 < $n && str_starts_with($lines[$i + 1], '|')) {
            $i++;
            $cells = cells($lines[$i]);
            $connections = str_replace(',', '', $cells[$columns['connections']] ?? '');
            $ratio = $cells[$columns[RATIO_COLUMN]] ?? '';
            $endpoint = $cells[$columns['endpoint']] ?? '';
            if (preg_match('/^\d+$/', $connections) !== 1 || !is_numeric($ratio) || $endpoint === '') {
                fail(sprintf('line %d: a row of the table "%s" that does not read (connections %s, endpoint %s, ratio %s): %s', $i + 1, $caption ?? '', var_export($connections, true), var_export($endpoint, true), var_export($ratio, true), trim($lines[$i])));
            }
            $rows[] = ['connections' => (int) $connections, 'endpoint' => $endpoint, 'ratio' => (float) $ratio, 'label' => $ratio];
        }
        if ($rows === []) {
            fail(sprintf('line %d: the table "%s" has no rows', $i + 1, $caption ?? ''));
        }
        $tables[] = ['caption' => $caption ?? 'web.sh', 'rows' => $rows];
        $caption = null;
    }
    if ($tables === []) {
        fail('no table of benches/web.sh in the input: none has a header with the columns "connections", "endpoint" and "' . RATIO_COLUMN . '" (bash benches/web.sh | tee FILE saves one)');
    }

    return ['tables' => $tables, 'notes' => $notes];
}

/** @return list<string> the cells of a Markdown table row */
function cells(string $line): array
{
    return array_map('trim', explode('|', trim(trim($line), '|')));
}

function fail(string $message): never
{
    fwrite(STDERR, "chart: {$message}\n");
    exit(1);
}

function e(string $text): string
{
    return htmlspecialchars($text, ENT_XML1 | ENT_QUOTES, 'UTF-8');
}

function svg(array $chart): string
{
    $width = 960;
    $left = 70;
    $right = 20;
    $plotWidth = $width - $left - $right;
    $plotHeight = 230;
    $panelGap = 86;   // the x labels and the next panel's caption

    $endpoints = [];
    $max = 1.0;
    foreach ($chart['tables'] as $table) {
        foreach ($table['rows'] as $row) {
            $endpoints[$row['endpoint']] = true;
            $max = max($max, $row['ratio']);
        }
    }
    $endpoints = array_keys($endpoints);
    $spare = SPARE_COLOURS;
    $colours = [];
    foreach ($endpoints as $i => $endpoint) {
        $colours[$endpoint] = COLOURS[$endpoint] ?? ($spare[$i % count($spare)]);
    }
    // The y axis to the next 0.25 above the largest ratio, ticks every 0.25.
    $top = ceil($max * 4 + 0.2) / 4;
    $y = static fn (float $ratio, float $base): float => $base + $plotHeight * (1 - $ratio / $top);

    $title = 'req/s of each endpoint ÷ req/s of Ganesha over the do-nothing adapter (higher is faster)';
    $subtitle = 'benches/web.sh: nginx in front of php-fpm, wrk on loopback; each request builds Ganesha, one isAvailable() and one success()';
    $legendTop = 78 + 18 * count($chart['notes']);
    $legendRows = (int) ceil((count($endpoints) + 1) / 3);   // and the line at 1
    $firstPanel = $legendTop + 22 * $legendRows + 30;
    $height = (int) ($firstPanel + count($chart['tables']) * ($plotHeight + $panelGap) - 20);

    $out = [];
    $out[] = '<?xml version="1.0" encoding="UTF-8"?>';
    $out[] = sprintf('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">', $width, $height, $width, $height);
    $out[] = sprintf('<title>%s</title>', e($title));
    $out[] = sprintf('<rect width="%d" height="%d" fill="#ffffff"/>', $width, $height);
    $out[] = sprintf('<text class="title" x="%d" y="30" font-size="16" font-weight="bold">%s</text>', $left - 50, e($title));
    $out[] = sprintf('<text class="subtitle" x="%d" y="52" fill="#444444">%s</text>', $left - 50, e($subtitle));
    foreach ($chart['notes'] as $i => $note) {
        $out[] = sprintf('<text class="note" x="%d" y="%d" fill="#444444">%s</text>', $left - 50, 70 + 18 * $i, e($note));
    }
    // The legend: three endpoints a row.
    foreach ($endpoints as $i => $endpoint) {
        $lx = $left + ($i % 3) * 290;
        $ly = $legendTop + 22 * intdiv($i, 3);
        $out[] = sprintf('<g class="legend-item"><rect x="%d" y="%d" width="14" height="14" fill="%s"/><text x="%d" y="%d">%s</text></g>', $lx, $ly, $colours[$endpoint], $lx + 20, $ly + 12, e($endpoint));
    }
    $lx = $left + (count($endpoints) % 3) * 290;
    $ly = $legendTop + 22 * intdiv(count($endpoints), 3);
    $out[] = sprintf('<g class="legend-item"><line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#000000" stroke-width="1.5" stroke-dasharray="6 4"/><text x="%d" y="%d">1: as fast as the do-nothing adapter</text></g>', $lx - 4, $lx + 16, $ly + 7, $ly + 7, $lx + 20, $ly + 12);

    foreach ($chart['tables'] as $p => $table) {
        $base = $firstPanel + $p * ($plotHeight + $panelGap);
        $services = preg_match('/^([\d,]+) services?/', $table['caption'], $m) === 1 ? str_replace(',', '', $m[1]) : ($table['caption'] === 'One service' ? '1' : '');
        $out[] = sprintf('<g class="panel" data-caption="%s">', e($table['caption']));
        $out[] = sprintf('<text class="caption" x="%d" y="%d" font-size="14" font-weight="bold">%s</text>', $left, $base - 12, e($table['caption']));
        // Grid and y axis.
        for ($tick = 0.0; $tick <= $top + 1e-9; $tick += 0.25) {
            $ty = $y($tick, $base);
            $out[] = sprintf('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1"/>', $left, $left + $plotWidth, $ty, $ty, $tick == 0.0 ? '#000000' : '#e3e3e3');
            $out[] = sprintf('<text class="tick" x="%d" y="%.1f" text-anchor="end" fill="#444444">%.2f</text>', $left - 6, $ty + 4, $tick);
        }
        $out[] = sprintf('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#000000"/>', $left, $left, $base, $base + $plotHeight);
        $out[] = sprintf('<text class="axis-label" transform="translate(%d %d) rotate(-90)" text-anchor="middle" fill="#444444">%s</text>', $left - 46, $base + $plotHeight / 2, e(RATIO_COLUMN));

        // Groups by connections, in the order of the table; a bar per endpoint in each.
        $groups = [];
        foreach ($table['rows'] as $row) {
            $groups[$row['connections']][] = $row;
        }
        $groupWidth = $plotWidth / count($groups);
        $labels = [];   // drawn last, over the line at 1, each on a white outline
        $g = 0;
        foreach ($groups as $connections => $rows) {
            $gx = $left + $g * $groupWidth;
            $slot = ($groupWidth - 30) / count($endpoints);
            $barWidth = max(2.0, $slot - 6);
            foreach ($rows as $row) {
                $k = array_search($row['endpoint'], $endpoints, true);
                $bx = $gx + 15 + $k * $slot + ($slot - $barWidth) / 2;
                $by = $y($row['ratio'], $base);
                $label = $row['label'];   // as the table printed it
                $out[] = sprintf(
                    '<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" data-services="%s" data-connections="%d" data-endpoint="%s" data-ratio="%s"><title>%s</title></rect>',
                    $bx, $by, $barWidth, $base + $plotHeight - $by, $colours[$row['endpoint']], e($services), $connections, e($row['endpoint']), e($label),
                    e(sprintf('%s, %d connections, %s: %s', $table['caption'], $connections, $row['endpoint'], $label)),
                );
                $labels[] = sprintf('<text class="ratio" x="%.1f" y="%.1f" text-anchor="middle" font-size="10" stroke="#ffffff" stroke-width="3" paint-order="stroke">%s</text>', $bx + $barWidth / 2, $by - 4, e($label));
            }
            $out[] = sprintf('<text class="group" x="%.1f" y="%d" text-anchor="middle">%d connections</text>', $gx + $groupWidth / 2, $base + $plotHeight + 20, $connections);
            $g++;
        }
        // The do-nothing adapter's level, over the bars.
        $one = $y(1.0, $base);
        $out[] = sprintf('<line class="one" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#000000" stroke-width="1.5" stroke-dasharray="6 4"/>', $left, $left + $plotWidth, $one, $one);
        array_push($out, ...$labels);
        $out[] = '</g>';
    }
    $out[] = '</svg>';

    return implode("\n", $out) . "\n";
}

$input = $argv[1] ?? '-';
$output = $argv[2] ?? '-';
if ($input === '-h' || $input === '--help' || $argc > 3) {
    fwrite($argc > 3 ? STDERR : STDOUT, "usage: php benches/chart.php [WEB_OUTPUT|-] [CHART.svg|-]\n");
    exit($argc > 3 ? 2 : 0);
}
$text = $input === '-' ? stream_get_contents(STDIN) : @file_get_contents($input);
if ($text === false) {
    fail("cannot read {$input}");
}
$svg = svg(parse(preg_split('/\r\n|\n/', $text)));
if ($output === '-') {
    echo $svg;
} elseif (file_put_contents($output, $svg) === false) {
    fail("cannot write {$output}");
}
