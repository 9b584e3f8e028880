<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\Attributes\DataProvider;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;

/**
 * Whoever may write the segment file may shrink it under the processes that map it, and their
 * next access past the new end would raise SIGBUS and kill them. A process counting in the file
 * is stopped half way, the file is truncated (by www-data, through docs/scope.md's group setup, when
 * the test runs as root), and the process goes on: it is not killed, counts the rest in a
 * segment of its own, logs the loss once and shows it in ganesha_shm_info(). Growing or
 * replacing the file faults nothing: the process goes on in the segment it mapped.
 */
final class TruncatedFileTest extends TestCase
{
    private string $dir;

    private string $path;

    protected function setUp(): void
    {
        $this->dir = TempDir::create('ganesha_shm_truncated.');
        $this->path = $this->dir . '/circuits';
    }

    protected function tearDown(): void
    {
        TempDir::remove($this->dir);
    }

    /**
     * The attack, and whether the process loses the file: at its next access (`always`); at its
     * first access past the new end, which depends on where its keys' slots lie (`maybe`); or
     * never, since its mapping stays whole (`never`).
     *
     * @return iterable<string, array{string, 'always'|'maybe'|'never'}>
     */
    public static function attacks(): iterable
    {
        yield 'truncated to 0' => ['truncate -s 0', 'always'];
        yield 'truncated to one page' => ['truncate -s 4096', 'maybe'];
        yield 'truncated to half' => ['truncate -s HALF', 'maybe'];
        yield 'grown' => ['truncate -s +1M', 'never'];
        yield 'replaced' => ['replace', 'never'];
    }

    /**
     * @dataProvider attacks
     */
    #[DataProvider('attacks')]
    public function testAProcessMappingTheFileOutlivesTheAttack(string $attack, string $loses): void
    {
        $attacker = $this->attackerPrefix();
        $command = [\PHP_BINARY, '-n', '-d', 'extension=' . Php::extensionPath(), '-d', 'ganesha_shm.path=' . $this->path,
            '-d', 'ganesha_shm.mode=0660', '-d', 'log_errors=1', '-d', 'display_errors=0', '-d', 'error_log=/dev/stderr',
            '-r', $this->program()];
        $process = \proc_open($command, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        self::assertIsResource($process);
        self::assertSame("ready\n", \fgets($pipes[1]), 'the process counted its first 1,000 events');

        if ($attack === 'replace') {
            \copy($this->path, $this->path . '.new');
            \rename($this->path . '.new', $this->path);
        } else {
            $attack = \str_replace('HALF', (string) \intdiv((int) \filesize($this->path), 2), $attack);
            \exec($attacker . $attack . ' ' . \escapeshellarg($this->path) . ' 2>&1', $output, $exit);
            self::assertSame(0, $exit, \implode("\n", $output));
        }
        \fwrite($pipes[0], "go\n");
        \fclose($pipes[0]);
        $stdout = \stream_get_contents($pipes[1]);
        $stderr = \stream_get_contents($pipes[2]);
        $status = \proc_close($process);

        self::assertSame(0, $status, "the process survived the attack\nstdout: {$stdout}\nstderr: {$stderr}");
        $result = \json_decode((string) $stdout, true, 512, \JSON_THROW_ON_ERROR);
        $lost = $result['segment_lost'] !== null;
        if ($loses !== 'maybe') {
            self::assertSame($loses === 'always', $lost, 'the file is lost ' . $loses);
        }
        if ($lost) {
            // the events after the loss only, in the segment of its own: all 1,000 when it came
            // at the first access after the attack
            $loses === 'always'
                ? self::assertSame(1000, $result['count'])
                : self::assertLessThanOrEqual(1000, $result['count']);
            self::assertStringContainsString('truncated', (string) $result['segment_lost']);
            self::assertSame(1, \substr_count($stderr, 'segment file was truncated'), "one warning line:\n{$stderr}");
        } else {
            self::assertSame(2000, $result['count'], 'nothing lost');
            self::assertStringNotContainsString('truncated', $stderr);
        }
        self::assertTrue($result['closed_after'], 'every call after the attack was answered');
    }

    /**
     * The shell prefix running a command as the attacker: www-data, with write access to the file
     * through its group as docs/scope.md sets it up, when the test runs as root; this user otherwise.
     */
    private function attackerPrefix(): string
    {
        $user = \posix_getpwnam('www-data');
        if (\posix_geteuid() !== 0 || $user === false || !\is_executable('/usr/sbin/runuser')) {
            return '';
        }
        \chmod($this->dir, 03770);
        \chgrp($this->dir, $user['gid']);

        return 'runuser -u www-data -- ';
    }

    private function program(): string
    {
        return Php::autoloadCode() . \sprintf(
            ' $a = new \\%s(); $a->setContext(\\%s::make(60));
            for ($i = 0; $i < 1000; ++$i) { $a->increment("k"); }
            echo "ready\n"; fflush(STDOUT);
            fgets(STDIN);
            for ($i = 0; $i < 1000; ++$i) { $a->increment("k"); }
            $closed = $a->loadStatus("s") === 1 && $a->load("other") === 0;
            $info = ganesha_shm_info();
            echo json_encode(["count" => $a->load("k"), "segment_lost" => $info["segment_lost"] ?? null, "closed_after" => $closed]);',
            TestAdapter::class,
            FakeContext::class
        );
    }
}
