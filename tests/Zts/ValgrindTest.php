<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Zts;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The harness's threads under valgrind's memcheck, for a short run (4 threads of Ganesha's
 * requests, then 4 reading what they counted): no invalid access, no use of an uninitialised
 * value and no definite leak. PHP's own reports under threads are suppressed by memcheck.supp,
 * each with why.
 */
final class ValgrindTest extends TestCase
{
    private string $dir = '';

    protected function setUp(): void
    {
        $missing = ZtsPhp::missing() ?? Autoload::ganeshaMissing();
        if ($missing === null && Command::which('valgrind') === null) {
            $missing = 'valgrind is not installed (apt-get install valgrind; .ci/install-deps installs it)';
        }
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        $this->dir = TempDir::create('ganesha-shm-zts-valgrind-');
    }

    protected function tearDown(): void
    {
        if ($this->dir !== '') {
            TempDir::remove($this->dir);
        }
    }

    public function testMemcheckFindsNothingInThreadsServingGanesha(): void
    {
        $service = Unique::name('memcheck.');
        $result = $this->underValgrind(['--tool=memcheck', '--leak-check=full', '--errors-for-leak-kinds=definite', '--error-exitcode=99', '--suppressions=' . __DIR__ . '/memcheck.supp'],
            ['script' => 'ganesha', 'op' => 'failure', 'last' => 'snapshot', 'service' => $service, 'minimum' => 1_000_000]);

        self::assertSame(0, $result['exit'], "memcheck's report\n" . $this->log());
        foreach (\array_filter($result['answers'], static fn (array $answer): bool => $answer['wave'] === 1) as $answer) {
            self::assertSame(4, $answer['snapshot']['failures'], "the first wave's failures");
        }
    }

    /**
     * Runs the harness (4 threads, 2 waves of 1 request, then PHP's shutdown, which a forked
     * child would skip and leave its memory to the leak check) with a segment file under
     * valgrind with $options, its log into the test's directory.
     *
     * @param list<string> $options
     * @param array<string, scalar> $query
     * @return array{exit: int, stdout: string, stderr: string, answers: list<array<string, mixed>>}
     */
    private function underValgrind(array $options, array $query): array
    {
        $wrapper = ['valgrind', ...$options, '--log-file=' . $this->dir . '/valgrind.%p'];
        \putenv('USE_ZEND_ALLOC=0');
        try {
            return ZtsPhp::run(4, 1, $query, ['ganesha_shm.path' => $this->dir . '/segment'], 2, false, $wrapper, 300.0);
        } finally {
            \putenv('USE_ZEND_ALLOC');
        }
    }

    /** What valgrind logged, of every process it ran. */
    private function log(): string
    {
        $log = '';
        foreach (\glob($this->dir . '/valgrind.*') ?: [] as $file) {
            $log .= (string) \file_get_contents($file);
        }

        return $log;
    }
}
