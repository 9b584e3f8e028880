<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Zts;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;
use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * PHP on threads of one process, as FrankenPHP runs it: a thread-safe PHP's embed SAPI started
 * once, requests served on POSIX threads (tests/Zts/harness.c), each request building the real
 * Ganesha over SlidingTimeWindowShm (or the adapter's native class) as an application does. All
 * the threads of a process share its segment, and nothing is lost or counted twice between them.
 */
final class ThreadsTest extends TestCase
{
    /** Tripped by 2 failures; a trial is due 5 s after the trip. */
    private const TRIP = ['window' => 60, 'minimum' => 2, 'interval' => 5];

    private string $dir = '';

    protected function setUp(): void
    {
        $missing = ZtsPhp::missing() ?? Autoload::ganeshaMissing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        $this->dir = TempDir::create('ganesha-shm-zts-');
    }

    protected function tearDown(): void
    {
        if ($this->dir !== '') {
            TempDir::remove($this->dir);
        }
    }

    public function testEveryFailureOfEightThreadsIsCountedOnce(): void
    {
        $service = Unique::name('threads.');
        $result = self::succeeded(ZtsPhp::run(8, 250, ['script' => 'ganesha', 'op' => 'failure', 'last' => 'snapshot', 'service' => $service, 'window' => 600, 'minimum' => 1_000_000], [], 2));

        self::assertCount(8 * 250 * 2, $result['answers']);
        foreach (self::lastWave($result, 2) as $answer) {
            self::assertSame(8 * 250, $answer['snapshot']['failures'], "thread {$answer['thread']} reads every failure of the first wave");
        }
    }

    public function testSixteenThreadsReleasedAtOnceLetOneTrialThrough(): void
    {
        $tripAt = \time();
        for ($round = 0; $round < 3; ++$round) {
            // wave 0: every thread fails at the trip time (the circuit trips); wave 1: every thread,
            // held at the harness's barrier, asks 6 s later, with the interval passed
            $result = self::succeeded(ZtsPhp::run(16, 1, ['script' => 'ganesha', 'op' => 'failure', 'now' => $tripAt, 'last' => 'available', 'last_barrier' => 1, 'last_now' => $tripAt + self::TRIP['interval'] + 1, 'service' => Unique::name('race.')] + self::TRIP, [], 2));
            $admitted = \array_filter(self::lastWave($result, 2), static fn (array $answer): bool => $answer['available']);
            self::assertCount(1, $admitted, "round {$round}: one thread of 16 let through");
        }
    }

    public function testThreadsCreatedAndFreedInWavesLoseNoCount(): void
    {
        $key = Unique::name('churn_');
        $result = self::succeeded(ZtsPhp::run(8, 2, ['script' => 'native', 'op' => 'increment', 'last' => 'load', 'key' => $key, 'keys' => [$key]], [], 41));

        self::assertCount(8 * 41, \array_unique(\array_column($result['answers'], 'thread')), 'a thread of its own for each of 8 × 41');
        foreach (self::lastWave($result, 41) as $answer) {
            self::assertSame([$key => 8 * 40 * 2], $answer['counts']);
        }
    }

    public function testASegmentFileIsSharedWithAnotherProcess(): void
    {
        $path = $this->dir . '/circuits';
        $key = Unique::name('shared_');
        $ini = ['ganesha_shm.path' => $path];
        // the harness's threads and a thread-safe CLI increment at the same time
        $cli = \proc_open(
            [ZtsPhp::cli(), '-n', '-d', 'extension=' . ZtsPhp::extension(), '-d', 'ganesha_shm.path=' . $path, __DIR__ . '/scripts/increment.php', $key, '2000'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $this->dir . '/cli.out', 'w'], 2 => ['file', $this->dir . '/cli.err', 'w']],
            $pipes
        );
        self::assertIsResource($cli);
        $threads = ZtsPhp::run(8, 250, ['script' => 'native', 'op' => 'increment', 'key' => $key], $ini);
        $exit = \proc_close($cli);
        self::succeeded($threads);
        self::assertSame(0, $exit, 'the CLI: ' . \file_get_contents($this->dir . '/cli.err'));

        $read = self::succeeded(ZtsPhp::run(1, 1, ['script' => 'native', 'op' => 'load', 'keys' => [$key]], $ini));
        self::assertSame([$key => 2000 + 8 * 250], $read['answers'][0]['counts']);
    }

    public function testAFileTruncatedWhileThreadsUseItCrashesNothing(): void
    {
        $path = $this->dir . '/circuits';
        $key = Unique::name('truncated_');
        $command = ZtsPhp::command(4, 400, ['script' => 'native', 'op' => 'increment', 'key' => $key], ['ganesha_shm.path' => $path]);
        $harness = \proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $this->dir . '/out', 'w'], 2 => ['file', $this->dir . '/err', 'w']], $pipes);
        self::assertIsResource($harness);
        // truncated once a tenth of the requests ran
        $deadline = \microtime(true) + 60;
        while (\substr_count((string) @\file_get_contents($this->dir . '/out'), "\n") < 160 && \microtime(true) < $deadline) {
            \usleep(5_000);
        }
        \clearstatcache();
        self::assertFileExists($path);
        $file = \fopen($path, 'r+');
        \ftruncate($file, 0);
        \fclose($file);
        $exit = \proc_close($harness);
        $stderr = (string) \file_get_contents($this->dir . '/err');
        $lines = \array_filter(\explode("\n", (string) \file_get_contents($this->dir . '/out')));

        self::assertSame(0, $exit, "every request ran to its end\n{$stderr}");
        self::assertCount(4 * 400, $lines, 'every request answered');
        foreach ($lines as $line) {
            self::assertNull(\json_decode($line, true, 512, \JSON_THROW_ON_ERROR)['error']);
        }
        self::assertSame(1, \substr_count($stderr, 'the segment file was truncated under its mapping'), "the loss said once for the process\n{$stderr}");
    }

    public function testAClockCallableAndAContextCalledBackFromEveryThread(): void
    {
        // native.php's adapter has a duck-typed context and, with `now`, a clock callable: every
        // call of the adapter calls back into PHP on the thread that made it
        $key = Unique::name('callback_');
        $now = \time() - 30;
        $result = self::succeeded(ZtsPhp::run(8, 100, ['script' => 'native', 'op' => 'increment', 'last' => 'load', 'key' => $key, 'keys' => [$key], 'now' => $now], [], 2));
        foreach (self::lastWave($result, 2) as $answer) {
            self::assertSame([$key => 8 * 100], $answer['counts']);
        }
        $service = Unique::name('clocked.');
        $result = self::succeeded(ZtsPhp::run(8, 50, ['script' => 'ganesha', 'op' => 'failure', 'last' => 'snapshot', 'service' => $service, 'now' => $now, 'minimum' => 1_000_000], [], 2));
        foreach (self::lastWave($result, 2) as $answer) {
            self::assertSame([$now, 8 * 50], [$answer['time'], $answer['snapshot']['failures']]);
        }
    }

    /**
     * @param array{exit: int, stdout: string, stderr: string, answers: list<array<string, mixed>>} $result
     * @return array{exit: int, stdout: string, stderr: string, answers: list<array<string, mixed>>}
     */
    private static function succeeded(array $result): array
    {
        self::assertSame(0, $result['exit'], "the harness failed\n" . $result['stderr']);
        self::assertSame('', $result['stderr'], 'nothing on standard error');

        return $result;
    }

    /**
     * The answers of the last of $waves waves.
     *
     * @param array{answers: list<array<string, mixed>>} $result
     * @return list<array<string, mixed>>
     */
    private static function lastWave(array $result, int $waves): array
    {
        $last = \array_values(\array_filter($result['answers'], static fn (array $answer): bool => $answer['wave'] === $waves - 1));
        self::assertNotSame([], $last, 'the last wave answered');

        return $last;
    }
}
