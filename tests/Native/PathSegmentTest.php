<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Native;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\FakeContext;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;

/**
 * The host-wide segment: `ganesha_shm.path` names a file that every PHP process mapping it
 * shares, whoever started them; a file that cannot be trusted is refused with one line in the
 * log, and the process falls back to an anonymous segment.
 */
final class PathSegmentTest extends TestCase
{
    /** Header words, by index (crates/core/src/segment.rs). */
    private const WORD_LAYOUT_VERSION = 1;
    private const WORD_SEGMENT_BYTES = 2;

    private string $dir;

    private string $path;

    protected function setUp(): void
    {
        $this->dir = TempDir::create('ganesha_shm_path.');
        $this->path = $this->dir . '/circuits';
    }

    protected function tearDown(): void
    {
        TempDir::remove($this->dir);
    }

    public function testProcessesThatAreNotParentAndChildShareTheCounters(): void
    {
        $first = $this->inProcess('$a->increment("k"); $a->saveStatus("s", 2);');
        self::assertSame($this->path, $first['segment']);

        // four processes at once, none the parent of another, then one after they all ended
        $writers = [];
        for ($i = 0; $i < 4; ++$i) {
            $writers[] = $this->start('for ($i = 0; $i < 250; ++$i) { $a->increment("k"); }');
        }
        foreach ($writers as $writer) {
            self::assertSame(0, $this->finish($writer));
        }
        $last = $this->inProcess('');

        self::assertSame(1001, $last['count']);
        self::assertSame(2, $last['status']);
        self::assertSame($this->path, $last['segment']);
    }

    /**
     * Processes that are not parent and child, SIGKILLed at random moments while they create
     * keys and increment shared ones in the file: the counts of the others are all there, and a
     * new process then records and reads within the deadline of Php (a hang fails the test).
     */
    public function testUnrelatedProcessesKilledMidWriteLeaveTheFileUsable(): void
    {
        $writers = 6;
        $iterations = 4000;
        for ($round = 0; $round < 8; ++$round) {
            // the victims write until they are killed, at a random moment; the others write
            // $iterations times and exit
            $victims = \array_rand(\range(0, $writers - 1), 3);
            $processes = [];
            for ($w = 0; $w < $writers; ++$w) {
                $processes[$w] = $this->start(\strtr(
                    'for ($i = 0; $i < LIMIT; ++$i) { $a->increment("rROUND"); $a->increment("rROUND.wWRITER"); $a->increment("rROUND.wWRITER.n" . ($i % 20)); }',
                    ['LIMIT' => \in_array($w, $victims, true) ? 'PHP_INT_MAX' : (string) $iterations, 'ROUND' => (string) $round, 'WRITER' => (string) $w]
                ));
            }
            foreach ($victims as $victim) {
                \usleep(\random_int(5_000, 40_000));
                \proc_terminate($processes[$victim], \SIGKILL);
            }
            foreach ($processes as $w => $process) {
                $exit = $this->finish($process);
                self::assertSame(\in_array($w, $victims, true) ? -1 : 0, $exit, "round {$round}: writer {$w} (-1: killed)");
            }
            $killed = \count($victims);
            $keys = \array_map(static fn (int $w) => "r{$round}.w{$w}", \range(0, $writers - 1));
            $counts = Php::json(Php::autoloadCode() . \strtr(
                ' $a = new \\ADAPTER(); $a->setContext(\\CONTEXT::make(60)); $a->increment("fresh.ROUND");
                echo json_encode(array_map(fn ($k) => $a->load($k), KEYS + ["shared" => "rROUND", "fresh" => "fresh.ROUND"]));',
                ['ADAPTER' => TestAdapter::class, 'CONTEXT' => FakeContext::class, 'ROUND' => (string) $round, 'KEYS' => \var_export($keys, true)]
            ), ['ganesha_shm.path' => $this->path]);

            $own = 0;
            foreach ($keys as $w => $key) {
                if (!\in_array($w, $victims, true)) {
                    self::assertSame($iterations, $counts[$w], "round {$round}: a survivor's count");
                }
                $own += $counts[$w];
            }
            self::assertGreaterThanOrEqual($own, $counts['shared'], "round {$round}: no increment of the shared key lost");
            self::assertLessThanOrEqual($own + $killed, $counts['shared'], "round {$round}: none counted twice");
            self::assertSame(1, $counts['fresh'], "round {$round}: a new key after the kills");
        }
    }

    public function testANewFileGetsTheConfiguredModeForThisUser(): void
    {
        $this->inProcess('');
        self::assertSame(0600, \fileperms($this->path) & 07777);
        self::assertSame(\posix_geteuid(), \fileowner($this->path));
        self::assertSame('GANESHM1', \file_get_contents($this->path, false, null, 0, 8));
        self::assertSame([$this->path], \glob($this->dir . '/{,.}*[!.]', \GLOB_BRACE), 'no temporary file left');

        \unlink($this->path);
        $this->inProcess('', ['ganesha_shm.mode' => '0640']);
        self::assertSame(0640, \fileperms($this->path) & 07777);
    }

    /**
     * docs/scope.md's recipe for a php-fpm master started as root and CLI commands run as
     * www-data: a setgid and sticky directory of group www-data, and ganesha_shm.mode=0660.
     */
    public function testARootFileIsSharedWithAnotherUserThroughItsGroup(): void
    {
        $user = \posix_getpwnam('www-data');
        if (\posix_geteuid() !== 0 || $user === false || !\is_executable('/usr/sbin/runuser')) {
            self::markTestSkipped('needs root, runuser and a www-data user');
        }
        \chmod($this->dir, 03770);
        \chgrp($this->dir, $user['gid']);
        $extension = $this->dir . '/ganesha_shm.so';
        \copy(Php::extensionPath(), $extension);
        \chmod($extension, 0644);
        $ini = ['ganesha_shm.mode' => '0660'];
        $this->inProcess('$a->increment("k");', $ini);

        $command = \sprintf(
            'runuser -u www-data -- %s -n -d extension=%s -d ganesha_shm.path=%s -d ganesha_shm.mode=0660 -r %s 2>&1',
            \escapeshellarg(\PHP_BINARY),
            \escapeshellarg($extension),
            \escapeshellarg($this->path),
            \escapeshellarg('$i = ganesha_shm_info(); echo $i["segment"], " ", $i["counter_slots_used"];')
        );
        \exec($command, $output, $exit);

        self::assertSame(0, $exit, \implode("\n", $output));
        self::assertSame($this->path . ' 1', \implode("\n", $output), 'www-data sees the counter root wrote');
        self::assertSame(0, \fileowner($this->path));
        self::assertSame($user['gid'], \filegroup($this->path));
    }

    public function testAModeThatKeepsTheOwnerOutOrLetsEveryoneWriteIsReplacedByTheDefault(): void
    {
        foreach (['0400', '1777', 'rw-------', '0666', '0662'] as $mode) {
            $result = Php::withExtension('echo json_encode(ganesha_shm_info()["segment"]);', ['ganesha_shm.path' => $this->path, 'ganesha_shm.mode' => $mode]);

            self::assertSame(\json_encode($this->path), $result['stdout'], $mode);
            self::assertStringContainsString(\sprintf('ganesha_shm.mode="%s" is not octal permissions from 0600 to 0775', $mode), $result['stderr']);
            self::assertSame(0600, \fileperms($this->path) & 07777, $mode);
            \unlink($this->path);
            \clearstatcache();
        }
    }

    public function testAFileOfAnotherUserIsRefused(): void
    {
        if (\posix_geteuid() !== 0) {
            self::markTestSkipped('giving the file to another user needs root');
        }
        $this->inProcess('');
        \chown($this->path, 65534);

        $this->assertRefused('it belongs to uid 65534, not to this process\'s uid 0 (nor root)');
    }

    public function testAFileWritableByTheGroupIsRefused(): void
    {
        $this->inProcess('');
        \chmod($this->path, 0620);

        $this->assertRefused('its mode 0620 grants more than ganesha_shm.mode allows (0600)');
    }

    public function testAFileWritableByOthersIsRefused(): void
    {
        $this->inProcess('', ['ganesha_shm.mode' => '0660']);
        \chmod($this->path, 0666);

        $this->assertRefused('its mode 0666 grants more than ganesha_shm.mode allows (0660)', ['ganesha_shm.mode' => '0660']);
    }

    public function testAFileOfTheWrongSizeIsRefused(): void
    {
        $this->inProcess('');
        $bytes = \filesize($this->path);
        \clearstatcache();
        \file_put_contents($this->path, "\0", \FILE_APPEND);

        $this->assertRefused(\sprintf('it is %d bytes long; its header needs %d', $bytes + 1, $bytes));
    }

    public function testAFileShorterThanAHeaderIsRefused(): void
    {
        \file_put_contents($this->path, 'GANESHM1');
        \chmod($this->path, 0600);

        $this->assertRefused('it is 8 bytes long, shorter than a segment header');
    }

    public function testAFileWithAForeignHeaderIsRefused(): void
    {
        $this->inProcess('');
        $size = \filesize($this->path);
        \file_put_contents($this->path, \random_bytes(64) . \str_repeat("\0", $size - 64));

        $this->assertRefused('it is not a ganesha_shm segment (no GANESHM1 header)');
    }

    public function testAFileWithACorruptHeaderIsRefused(): void
    {
        $this->inProcess('');
        $this->writeHeaderWord(self::WORD_SEGMENT_BYTES, 4096);

        $this->assertRefused('its header is corrupt (segment size)');
    }

    public function testAFileOfAnotherLayoutVersionIsRefused(): void
    {
        $this->inProcess('');
        // The version this build writes, read from the file it made.
        $version = \unpack('P', (string) \file_get_contents($this->path, false, null, self::WORD_LAYOUT_VERSION * 8, 8))[1];
        $this->writeHeaderWord(self::WORD_LAYOUT_VERSION, 99);

        $this->assertRefused("its layout version is 99; this build reads version {$version}");
    }

    public function testGrowingTheCapacityWithAnExistingFileIsRefused(): void
    {
        $this->inProcess('', ['ganesha_shm.max_services' => 8]);

        $this->assertRefused(
            'it was created for max_services=8, max_key_length=160, max_buckets=120, fleet=off, not for max_services=16, max_key_length=160, max_buckets=120, fleet=off',
            ['ganesha_shm.max_services' => 16]
        );
    }

    public function testShrinkingTheCapacityWithAnExistingFileIsRefused(): void
    {
        $this->inProcess('', ['ganesha_shm.max_services' => 8]);

        $this->assertRefused(
            'it was created for max_services=8, max_key_length=160, max_buckets=120, fleet=off, not for max_services=4, max_key_length=160, max_buckets=120, fleet=off',
            ['ganesha_shm.max_services' => 4]
        );
    }

    public function testChangingTheBucketsWithAnExistingFileIsRefused(): void
    {
        $this->inProcess('');

        $this->assertRefused(
            'it was created for max_services=1024, max_key_length=160, max_buckets=120, fleet=off, not for max_services=1024, max_key_length=160, max_buckets=60, fleet=off',
            ['ganesha_shm.max_buckets' => 60]
        );
    }

    public function testTurningFleetModeOnWithAnExistingFileIsRefused(): void
    {
        $this->inProcess('');

        $this->assertRefused(
            'it was created for max_services=1024, max_key_length=160, max_buckets=120, fleet=off, not for max_services=1024, max_key_length=160, max_buckets=120, fleet=on',
            ['ganesha_shm.fleet' => 1]
        );
    }

    public function testChangingTheKeyLengthWithAnExistingFileIsRefused(): void
    {
        $this->inProcess('');

        $this->assertRefused(
            'it was created for max_services=1024, max_key_length=160, max_buckets=120, fleet=off, not for max_services=1024, max_key_length=64, max_buckets=120, fleet=off',
            ['ganesha_shm.max_key_length' => 64]
        );
    }

    public function testASymbolicLinkIsRefused(): void
    {
        $target = $this->dir . '/target';
        $this->inProcess('', ['ganesha_shm.path' => $target]);
        \symlink($target, $this->path);

        $this->assertRefused('cannot open it: Too many levels of symbolic links');
    }

    /**
     * Finding 2 of issue 21, as nobody would mount it on a shared host: a link in a directory
     * everyone may write, pointing at a directory only root writes. Root refuses the path, names
     * the link, and creates nothing where it points.
     */
    public function testADirectoryOnThePathThatAnotherUserLinkedElsewhereIsRefused(): void
    {
        $this->requireRootAndNobody();
        \chmod($this->dir, 01777);
        $target = $this->dir . '/target';
        \mkdir($target, 0755);
        $this->asNobody(\sprintf('ln -s %s %s', \escapeshellarg($target), \escapeshellarg($this->dir . '/shared')));

        $this->assertRefused(
            "the directory {$this->dir}/shared cannot be opened as a directory, symbolic links not followed: Not a directory",
            ['ganesha_shm.path' => $this->dir . '/shared/circuits']
        );
        self::assertSame([], \array_values(\array_diff(\scandir($target), ['.', '..'])), 'nothing was created in the directory the link points at');
    }

    /**
     * A directory that nobody made, open to all (or to a group of its choosing): root refuses
     * it, so that nobody cannot pick the file's group, truncate it, or replace it.
     */
    public function testADirectoryOfAnotherUserIsRefused(): void
    {
        $this->requireRootAndNobody();
        \chmod($this->dir, 01777);
        $theirs = $this->dir . '/theirs';
        $this->asNobody(\sprintf('mkdir -m 2777 %s', \escapeshellarg($theirs)));

        $this->assertRefused(
            "the directory {$theirs} belongs to uid 65534, not to root nor to this process's uid 0",
            ['ganesha_shm.path' => $theirs . '/circuits']
        );
        self::assertFileDoesNotExist($theirs . '/circuits');
    }

    private function requireRootAndNobody(): void
    {
        if (\posix_geteuid() !== 0 || \posix_getpwnam('nobody') === false || !\is_executable('/usr/sbin/runuser')) {
            self::markTestSkipped('needs root, runuser and a nobody user');
        }
    }

    private function asNobody(string $command): void
    {
        \exec('runuser -u nobody -- ' . $command . ' 2>&1', $output, $exit);
        self::assertSame(0, $exit, \implode("\n", $output));
    }

    public function testADirectoryIsRefused(): void
    {
        \mkdir($this->path);

        $this->assertRefused('cannot open it: Is a directory');
    }

    public function testARelativePathIsRefused(): void
    {
        $this->assertRefused('the path is not absolute', ['ganesha_shm.path' => 'circuits']);
    }

    public function testAPathInAMissingDirectoryIsRefused(): void
    {
        $this->assertRefused(
            "the directory {$this->dir}/missing cannot be opened as a directory, symbolic links not followed: No such file or directory",
            ['ganesha_shm.path' => $this->dir . '/missing/circuits']
        );
    }

    public function testTheSettingsAreShownByPhpinfo(): void
    {
        $this->inProcess('');
        $result = Php::withExtension('phpinfo(INFO_MODULES);', ['ganesha_shm.path' => $this->path]);

        self::assertStringContainsString('Segment => ' . $this->path, $result['stdout']);
        self::assertStringContainsString('ganesha_shm.path => ' . $this->path, $result['stdout']);
        self::assertStringContainsString('ganesha_shm.mode => 0600', $result['stdout']);
    }

    /**
     * Starts a PHP process on the file and checks that it refused it: one line in its log
     * saying why, an anonymous segment that works, and the file left exactly as it was.
     *
     * @param array<string, string|int> $ini
     */
    private function assertRefused(string $reason, array $ini = []): void
    {
        $path = (string) ($ini['ganesha_shm.path'] ?? $this->path);
        $before = \is_file($path) ? \hash_file('sha256', $path) : null;
        $log = $this->dir . '/php.log';

        $result = $this->inProcess('$a->increment("k");', $ini + ['log_errors' => 1, 'error_log' => $log, 'display_startup_errors' => 0, 'display_errors' => 0]);

        $lines = \array_values(\array_filter(\explode("\n", (string) @\file_get_contents($log)), static fn (string $l) => \str_contains($l, 'ganesha_shm')));
        self::assertCount(1, $lines, 'one line in the log');
        self::assertStringContainsString(\sprintf('ganesha_shm.path="%s" refused: %s', $path, $reason), $lines[0]);
        self::assertStringContainsString('using an anonymous segment', $lines[0]);
        self::assertSame('anonymous', $result['segment']);
        self::assertStringContainsString($reason, $result['path_refused']);
        self::assertSame(1, $result['count'], 'the anonymous segment works');
        self::assertSame($before, \is_file($path) ? \hash_file('sha256', $path) : null, 'the refused file is left as it was');
        \unlink($log);
    }

    private function writeHeaderWord(int $index, int $value): void
    {
        $file = \fopen($this->path, 'r+b');
        \fseek($file, $index * 8);
        \fwrite($file, \pack('P', $value));
        \fclose($file);
    }

    /**
     * Runs $code in a new `php -n` process on the file, with $a an adapter; returns what it
     * then reads of key "k" and status "s", and its segment.
     *
     * @param array<string, string|int> $ini
     * @return array{count: int, status: ?int, segment: string, path_refused: ?string}
     */
    private function inProcess(string $code, array $ini = []): array
    {
        return Php::json($this->program($code), $ini + ['ganesha_shm.path' => $this->path]);
    }

    /** @return resource a `php -n` process running $code on the file */
    private function start(string $code)
    {
        $command = [\PHP_BINARY, '-n', '-d', 'extension=' . Php::extensionPath(), '-d', 'ganesha_shm.path=' . $this->path, '-r', $this->program($code)];
        $process = \proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
        self::assertIsResource($process);

        return $process;
    }

    /**
     * Waits for $process: its exit status, -1 if a signal ended it, -2 if it ran past 30 s
     * (then it is killed).
     *
     * @param resource $process
     */
    private function finish($process): int
    {
        $deadline = \microtime(true) + 30;
        while (($status = \proc_get_status($process))['running'] && \microtime(true) < $deadline) {
            \usleep(2_000);
        }
        if ($status['running']) {
            \proc_terminate($process, \SIGKILL);
        }
        \proc_close($process);

        return $status['running'] ? -2 : ($status['signaled'] ? -1 : $status['exitcode']);
    }

    private function program(string $code): string
    {
        return Php::autoloadCode() . \sprintf(
            ' $a = new \\%s(); $a->setContext(\\%s::make(60)); %s
            $info = ganesha_shm_info();
            echo json_encode(["count" => $a->load("k"), "status" => $a->loadStatus("s"), "segment" => $info["segment"], "path_refused" => $info["path_refused"] ?? null]);',
            TestAdapter::class,
            FakeContext::class,
            $code
        );
    }
}
