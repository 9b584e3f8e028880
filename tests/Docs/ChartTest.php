<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Docs;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * benches/chart.php, the chart of benches/web.sh's req/s ratios, on output as web.sh prints it
 * (its progress lines, two tables of ratios, the fleet table it must leave out): well-formed SVG
 * with a bar per table, connections and endpoint, each as tall as its ratio, labelled with it;
 * and input it cannot chart refused, saying why.
 */
final class ChartTest extends TestCase
{
    private const CHART = __DIR__ . '/../../benches/chart.php';

    /** web.sh's output, cut to two endpoints besides the do-nothing adapter and two concurrencies. */
    private const WEB_OUTPUT = <<<'TXT'
        web: nginx on 127.0.0.1:41234, php-fpm 8.2.29 with 2 workers (pm=static), wrk 4.1.0
        web: run of 2025-01-31 09:15 UTC: Some CPU, 2 CPUs, Linux 6.1.0
        web: round 1 of 1 done

        2 workers (pm=static), 1 s a run, medians of 1 rounds

        One service

        | connections | endpoint | req/s | req/s ÷ do-nothing | p50 | p99 | p99 ÷ do-nothing | p99.9 | errors |
        |---|---|---|---|---|---|---|---|---|
        | 8 | plain PHP, no Ganesha | 11,069 | 1.840 | 0.68 ms | 20.19 ms | 8.476 | 66.38 ms | 0 |
        | 8 | Ganesha, do-nothing adapter | 6,016 | 1 | 1.26 ms | 2.50 ms | 1 | 4.67 ms | 0 |
        | 8 | SlidingTimeWindowShm | 5,789 | 0.963 | 1.30 ms | 2.81 ms | 1.072 | 4.64 ms | 0 |
        | 64 | plain PHP, no Ganesha | 9,352 | 1.541 | 6.75 ms | 10.98 ms | 0.796 | 18.64 ms | 0 |
        | 64 | Ganesha, do-nothing adapter | 6,255 | 1 | 10.12 ms | 15.08 ms | 1 | 29.15 ms | 0 |
        | 64 | SlidingTimeWindowShm | 3,127 | 0.500 | 10.83 ms | 16.75 ms | 1.006 | 20.96 ms | 0 |

        1,000 services, each request on one at random

        | connections | endpoint | req/s | req/s ÷ do-nothing | p50 | p99 | p99 ÷ do-nothing | p99.9 | errors |
        |---|---|---|---|---|---|---|---|---|
        | 8 | plain PHP, no Ganesha | 10,888 | 1.865 | 0.69 ms | 34.95 ms | 9.449 | 88.88 ms | 0 |
        | 8 | Ganesha, do-nothing adapter | 5,540 | 1 | 1.37 ms | 4.44 ms | 1 | 7.62 ms | 0 |
        | 8 | SlidingTimeWindowShm | 5,591 | 0.941 | 1.38 ms | 2.81 ms | 1.055 | 6.78 ms | 0 |
        | 64 | plain PHP, no Ganesha | 9,124 | 1.682 | 6.84 ms | 11.68 ms | 0.651 | 14.45 ms | 0 |
        | 64 | Ganesha, do-nothing adapter | 5,423 | 1 | 11.44 ms | 17.94 ms | 1 | 21.33 ms | 0 |
        | 64 | SlidingTimeWindowShm | 5,176 | 0.954 | 11.97 ms | 20.84 ms | 1.109 | 23.85 ms | 0 |

        Fleet mode ÷ local SlidingTimeWindowShm (req/s, and local p99 ÷ fleet p99: above 1 is faster)

        | services | connections | req/s ratio | p99 ratio |
        |---|---|---|---|
        | 1 | 8 | 0.963 | 1.028 |

        Goal: SlidingTimeWindowShm within 2 % of the do-nothing adapter's req/s and p99 at every concurrency: not met
        web: the fleet sidecar: 0 sync failures; synced
        TXT;

    public function testEveryEndpointIsABarAsTallAsItsRatio(): void
    {
        $run = $this->chart(self::WEB_OUTPUT);
        self::assertSame(0, $run['exit'], $run['stderr']);
        self::assertSame('', $run['stderr']);
        $svg = self::load($run['stdout']);
        $xpath = new \DOMXPath($svg);
        $xpath->registerNamespace('s', 'http://www.w3.org/2000/svg');

        $bars = [];
        $heights = [];
        foreach ($xpath->query('//s:rect[@class="bar"]') as $bar) {
            \assert($bar instanceof \DOMElement);
            $key = \sprintf('%s services, %s connections, %s', $bar->getAttribute('data-services'), $bar->getAttribute('data-connections'), $bar->getAttribute('data-endpoint'));
            $bars[$key] = $bar->getAttribute('data-ratio');
            $heights[$key] = (float) $bar->getAttribute('height');
        }
        self::assertSame(
            [
                '1 services, 8 connections, plain PHP, no Ganesha' => '1.840',
                '1 services, 8 connections, Ganesha, do-nothing adapter' => '1',
                '1 services, 8 connections, SlidingTimeWindowShm' => '0.963',
                '1 services, 64 connections, plain PHP, no Ganesha' => '1.541',
                '1 services, 64 connections, Ganesha, do-nothing adapter' => '1',
                '1 services, 64 connections, SlidingTimeWindowShm' => '0.500',
                '1000 services, 8 connections, plain PHP, no Ganesha' => '1.865',
                '1000 services, 8 connections, Ganesha, do-nothing adapter' => '1',
                '1000 services, 8 connections, SlidingTimeWindowShm' => '0.941',
                '1000 services, 64 connections, plain PHP, no Ganesha' => '1.682',
                '1000 services, 64 connections, Ganesha, do-nothing adapter' => '1',
                '1000 services, 64 connections, SlidingTimeWindowShm' => '0.954',
            ],
            $bars,
            'a bar per table, connections and endpoint, and none of the fleet table',
        );
        $one = $heights['1 services, 64 connections, Ganesha, do-nothing adapter'];
        self::assertGreaterThan(100, $one);
        self::assertEqualsWithDelta(0.5, $heights['1 services, 64 connections, SlidingTimeWindowShm'] / $one, 0.01);
        self::assertEqualsWithDelta(1.840, $heights['1 services, 8 connections, plain PHP, no Ganesha'] / $one, 0.01);

        // Each bar labelled with its ratio as the table printed it; a line at 1 in each panel,
        // level with the top of the do-nothing adapter's bars.
        self::assertSame(\array_values($bars), self::texts($xpath, '//s:text[@class="ratio"]'));
        $lines = $xpath->query('//s:line[@class="one"]');
        self::assertSame(2, $lines->length);
        foreach ($xpath->query('//s:g[@class="panel"]') as $i => $panel) {
            $bottoms = [];
            foreach ($xpath->query('.//s:rect[@class="bar"]', $panel) as $bar) {
                \assert($bar instanceof \DOMElement);
                $bottoms[] = \round((float) $bar->getAttribute('y') + (float) $bar->getAttribute('height'), 1);
            }
            self::assertCount(1, \array_unique($bottoms), 'the bars of a panel stand on one axis');
            $floor = $xpath->query('.//s:rect[@class="bar"][@data-endpoint="Ganesha, do-nothing adapter"]', $panel)->item(0);
            \assert($floor instanceof \DOMElement);
            self::assertEqualsWithDelta((float) $floor->getAttribute('y'), (float) $lines->item($i)->getAttribute('y1'), 0.1);
        }

        // Panels, groups, legend, axis and what the run said of itself.
        self::assertSame(['One service', '1,000 services, each request on one at random'], self::texts($xpath, '//s:text[@class="caption"]'));
        self::assertSame(['8 connections', '64 connections', '8 connections', '64 connections'], self::texts($xpath, '//s:text[@class="group"]'));
        self::assertSame(
            ['plain PHP, no Ganesha', 'Ganesha, do-nothing adapter', 'SlidingTimeWindowShm', '1: as fast as the do-nothing adapter'],
            self::texts($xpath, '//s:g[@class="legend-item"]/s:text'),
        );
        self::assertContains('req/s ÷ do-nothing', self::texts($xpath, '//s:text[@class="axis-label"]'));
        self::assertStringContainsString('÷ req/s of Ganesha over the do-nothing adapter', self::texts($xpath, '//s:text[@class="title"]')[0]);
        self::assertSame(
            [
                'nginx, php-fpm 8.2.29 with 2 workers (pm=static), wrk 4.1.0',
                '2025-01-31 09:15 UTC: Some CPU, 2 CPUs, Linux 6.1.0',
                '2 workers (pm=static), 1 s a run, medians of 1 rounds',
            ],
            self::texts($xpath, '//s:text[@class="note"]'),
        );
    }

    public function testADateOrMachineTheOutputDoesNotNameIsNotMadeUp(): void
    {
        $output = \preg_replace('/^web: (nginx on|run of) .*\n/m', '', self::WEB_OUTPUT);
        $run = $this->chart((string) $output);
        self::assertSame(0, $run['exit'], $run['stderr']);
        $xpath = new \DOMXPath(self::load($run['stdout']));
        $xpath->registerNamespace('s', 'http://www.w3.org/2000/svg');

        self::assertSame(['2 workers (pm=static), 1 s a run, medians of 1 rounds'], self::texts($xpath, '//s:text[@class="note"]'));
        self::assertDoesNotMatchRegularExpression('/\d{4}-\d\d-\d\d|CPU|php-fpm 8/', $run['stdout']);
    }

    public function testInputWithoutATableOfRatiosIsRefusedSayingWhy(): void
    {
        $empty = $this->chart("web: round 1 of 3 done\n");
        self::assertSame(1, $empty['exit']);
        self::assertSame('', $empty['stdout']);
        self::assertStringStartsWith('chart: no table of benches/web.sh in the input', $empty['stderr']);

        $garbled = $this->chart(\str_replace('| 0.963 |', '| n/a |', self::WEB_OUTPUT));
        self::assertSame(1, $garbled['exit']);
        self::assertSame('', $garbled['stdout']);
        self::assertStringStartsWith('chart: line 13: a row of the table "One service" that does not read', $garbled['stderr']);
        self::assertStringContainsString("ratio 'n/a'", $garbled['stderr']);

        $missing = Command::run([\PHP_BINARY, self::CHART, __DIR__ . '/no-such-output.txt'], timeout: 30.0);
        self::assertSame(1, $missing['exit']);
        self::assertStringStartsWith('chart: cannot read ', $missing['stderr']);
    }

    public function testTheChartIsWrittenToTheFileNamed(): void
    {
        $dir = TempDir::create('ganesha-shm-chart-');
        try {
            \file_put_contents($dir . '/web.txt', self::WEB_OUTPUT);
            $run = Command::run([\PHP_BINARY, self::CHART, $dir . '/web.txt', $dir . '/web.svg'], timeout: 30.0);
            self::assertSame(0, $run['exit'], $run['stderr']);
            self::assertSame('', $run['stdout']);
            self::assertSame($this->chart(self::WEB_OUTPUT)['stdout'], \file_get_contents($dir . '/web.svg'));
        } finally {
            TempDir::remove($dir);
        }
    }

    /** @return array{exit: int, stdout: string, stderr: string} chart.php run on $input as its standard input */
    private function chart(string $input): array
    {
        return Command::run([\PHP_BINARY, self::CHART], timeout: 30.0, input: $input);
    }

    private static function load(string $svg): \DOMDocument
    {
        $document = new \DOMDocument();
        $previous = \libxml_use_internal_errors(true);
        try {
            $loaded = $document->loadXML($svg, \LIBXML_NONET);
            $errors = \array_map(static fn (\LibXMLError $e): string => "line {$e->line}: " . \trim($e->message), \libxml_get_errors());
            \libxml_clear_errors();
        } finally {
            \libxml_use_internal_errors($previous);
        }
        self::assertTrue($loaded, 'the chart is no well-formed XML: ' . \implode('; ', $errors));
        self::assertSame([], $errors);
        self::assertSame('svg', $document->documentElement?->localName);

        return $document;
    }

    /** @return list<string> */
    private static function texts(\DOMXPath $xpath, string $query): array
    {
        $texts = [];
        foreach ($xpath->query($query) as $node) {
            $texts[] = $node->textContent;
        }

        return $texts;
    }
}
