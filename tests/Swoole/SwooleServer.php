<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Swoole;

use Zeusi\GaneshaShmAdapter\Tests\Apache\HttpClient;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\JsonRequests;
use Zeusi\GaneshaShmAdapter\Tests\Support\Loopback;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\ProcFs;
use Zeusi\GaneshaShmAdapter\Tests\Support\StartingServer;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * A Swoole HTTP server of the tests' own: tests/Swoole/www/server.php run by `php -n -d
 * extension=<swoole.so> -d extension=<the extension>`, a Swoole\Http\Server in SWOOLE_PROCESS
 * mode on a free port of 127.0.0.1, with a fresh temporary directory (pid file, logs, barriers).
 * Swoole is loaded there only, never into PHPUnit's process: its swoole.so is the one
 * tests/swoole.sh builds into a cache outside the repository.
 *
 * Swoole's processes: the master (the process started, which ran PHP's startup and created
 * the segment), its manager, and the manager's workers, which the manager replaces when they
 * die. Requests go over plain HTTP (the apache suite's HttpClient), one connection each, handed
 * to the workers in turn (dispatch_mode 1); their JSON answers checked and decoded by
 * JsonRequests.
 *
 * The master runs as a child of this process, so its pid is known without a race, in a session
 * of its own (setsid: no signal of PHPUnit's terminal reaches it, and its group is its own), with
 * the kernel sending it SIGTERM if this process ends (setpriv --pdeathsig). It is stopped by
 * stop(): from the test's tearDown(), else from the destructor, else from a shutdown function.
 */
final class SwooleServer
{
    use JsonRequests;
    use StartingServer;

    public const DEFAULT_TAG = 'v6.2.2';

    /** util-linux's, which runs a program in a session of its own (and without forking, here). */
    private const SETSID = '/usr/bin/setsid';

    /** util-linux's, which sets the parent death signal and runs a program. */
    private const SETPRIV = '/usr/bin/setpriv';

    private const START_TIMEOUT_S = 15.0;

    /** What the messages of StartingServer call the server's process. */
    private const PROCESS_NAME = 'Swoole';

    private const SIGKILL = 9;
    private const SIGTERM = 15;

    /** @var resource|null the proc_open() handle of the master */
    private $process;

    private int $pid;

    private int $manager = 0;

    /** The PHPUnit process: forked children of it must not stop the server on their exit. */
    private int $owner;

    /** @var array<string, string|null> why Swoole cannot run, by swoole.so (null: it can) */
    private static array $missing = [];

    private function __construct(
        public readonly string $dir,
        public readonly int $port,
        public readonly int $workers,
        public readonly bool $hooks,
    ) {
        $this->owner = \getmypid();
    }

    public function __destruct()
    {
        $this->stop();
    }

    /**
     * The swoole.so tests/swoole.sh built: $GANESHA_SHM_SWOOLE_CACHE/<tag>/swoole.so (default
     * /var/cache/ganesha-shm-ci/swoole), of the tag GANESHA_SHM_SWOOLE_TAG (default v6.2.2).
     */
    public static function extension(): string
    {
        $cache = \getenv('GANESHA_SHM_SWOOLE_CACHE');
        $tag = \getenv('GANESHA_SHM_SWOOLE_TAG');

        return (\is_string($cache) && $cache !== '' ? \rtrim($cache, '/') : '/var/cache/ganesha-shm-ci/swoole')
            . '/' . (\is_string($tag) && $tag !== '' ? $tag : self::DEFAULT_TAG) . '/swoole.so';
    }

    /**
     * Why the swoole suite cannot run here, or null when it can: the swoole.so of
     * tests/swoole.sh, loadable by this PHP; posix_kill(); setsid.
     */
    public static function missing(): ?string
    {
        $so = self::extension();
        if (!\array_key_exists($so, self::$missing)) {
            self::$missing[$so] = self::whyNot($so);
        }

        return self::$missing[$so];
    }

    /**
     * Starts a server and waits (bounded) until it is ready: its pid file written, $workers
     * workers forked by its manager, and the port answering.
     *
     * @param bool $hooks Swoole\Runtime::enableCoroutine() with every hook (SWOOLE_HOOK_ALL), or none
     */
    public static function start(bool $hooks = true, int $workers = 4): self
    {
        $missing = self::missing();
        if ($missing !== null) {
            throw new \LogicException($missing);
        }
        $dir = TempDir::create('ganesha-shm-swoole-');
        $server = new self($dir, Loopback::freePort(), $workers, $hooks);

        $command = self::detached();
        \array_push(
            $command,
            \PHP_BINARY,
            '-n',
            '-d', 'extension=' . self::extension(),
            '-d', 'extension=' . Php::extensionPath(),
            '-d', 'error_reporting=-1',
            '-d', 'display_errors=stderr',
            __DIR__ . '/www/server.php',
            (string) $server->port,
            (string) $workers,
            $hooks ? 'on' : 'off',
            $dir,
        );
        // GANESHA_DIR (tests/autoload.php) reaches the server from this environment
        $out = $dir . '/server.out';
        $process = \proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $out, 'a'], 2 => ['file', $out, 'a']], $pipes, $dir);
        if (!\is_resource($process)) {
            throw new \RuntimeException('Could not start ' . \implode(' ', $command));
        }
        $server->process = $process;
        $server->pid = \proc_get_status($process)['pid'];
        $weak = \WeakReference::create($server);
        \register_shutdown_function(static function () use ($weak): void {
            $weak->get()?->stop();
        });

        try {
            $server->waitUntil('Swoole to start', static fn (): bool => \is_file($dir . '/swoole.pid') && HttpClient::get($server->port, '/', ['op' => 'ping'])['error'] === '');
            $ping = $server->json('/', ['op' => 'ping']);
            $server->manager = (int) $ping['manager'];
            if (!\in_array($server->manager, ProcFs::children($server->pid), true)) {
                throw new \RuntimeException("Swoole's manager {$server->manager} is no child of the master {$server->pid}");
            }
            $server->waitUntil("{$workers} workers", fn (): bool => \count($server->workerPids()) === $workers);
        } catch (\Throwable $e) {
            $server->stop();
            throw $e;
        }

        return $server;
    }

    public function masterPid(): int
    {
        return $this->pid;
    }

    public function managerPid(): int
    {
        return $this->manager;
    }

    /**
     * The manager's children, the workers, read from /proc; sorted.
     *
     * @return list<int>
     */
    public function workerPids(): array
    {
        return \array_values(\array_filter(ProcFs::children($this->manager), static fn (int $pid): bool => ProcFs::alive($pid)));
    }

    /**
     * Kills worker $pid with SIGKILL and waits (bounded) until the manager has forked its
     * replacement; returns the new worker's pid.
     */
    public function killWorker(int $pid): int
    {
        $before = $this->workerPids();
        if (!\in_array($pid, $before, true)) {
            throw new \LogicException("{$pid} is no worker of this server: " . \implode(' ', $before));
        }
        if (!\posix_kill($pid, self::SIGKILL)) {
            throw new \RuntimeException("Could not kill worker {$pid}");
        }
        $this->waitUntil("the manager to replace worker {$pid}", function () use ($pid): bool {
            $workers = $this->workerPids();

            return \count($workers) === $this->workers && !\in_array($pid, $workers, true);
        });
        $new = \array_values(\array_diff($this->workerPids(), $before));
        if (\count($new) !== 1) {
            throw new \RuntimeException("Expected one new worker after killing {$pid}, found: " . \implode(' ', $new));
        }

        return $new[0];
    }

    /**
     * The query parameters of a barrier for $parties requests: the server holds each request
     * given them (before its op) until $parties requests have reached it, so those requests are
     * in flight at once, as coroutines of the workers they were handed to.
     *
     * @return array{barrier: string, parties: int}
     */
    public function barrier(int $parties): array
    {
        $name = \bin2hex(\random_bytes(5));
        if (!\mkdir($this->dir . '/barrier-' . $name, 0700)) {
            throw new \RuntimeException("Could not create the barrier {$name}");
        }

        return ['barrier' => $name, 'parties' => $parties];
    }

    /** The server's output (PHP's errors included) and Swoole's log. */
    public function errorLog(): string
    {
        $log = '';
        foreach (['server.out', 'swoole.log'] as $file) {
            $contents = @\file_get_contents($this->dir . '/' . $file);
            if (\is_string($contents) && $contents !== '') {
                $log .= "--- {$file}\n" . \substr($contents, -4000);
            }
        }

        return $log === '' ? '(the logs are empty)' : $log;
    }

    /**
     * Ends the master, its manager and workers (SIGTERM to the master, then SIGKILL to every
     * one left after 5 s, and to the session's process group) and removes the temporary
     * directory. Idempotent; does nothing in a forked child of the PHPUnit process.
     */
    public function stop(): void
    {
        if ($this->process === null || \getmypid() !== $this->owner) {
            return;
        }
        $process = $this->process;
        $this->process = null;
        $pids = [$this->pid];
        if ($this->manager > 0) {
            \array_push($pids, $this->manager, ...$this->workerPids());
        }
        @\posix_kill($this->pid, self::SIGTERM);
        $left = static fn (): array => \array_filter($pids, static fn (int $pid): bool => ProcFs::alive($pid));
        $deadline = \microtime(true) + 5.0;
        while ((\proc_get_status($process)['running'] || $left() !== []) && \microtime(true) < $deadline) {
            \usleep(10_000);
        }
        foreach ($left() as $pid) {
            @\posix_kill($pid, self::SIGKILL);
        }
        // the master leads a group of its own (setsid): whatever is left of it
        @\posix_kill(-$this->pid, self::SIGKILL);
        \proc_close($process);
        TempDir::remove($this->dir);
    }

    private static function whyNot(string $so): ?string
    {
        if (!\is_file($so)) {
            return "Swoole is not built ({$so} is missing): bash tests/swoole.sh GIT_DIR, GIT_DIR a clone of swoole/swoole-src";
        }
        $loaded = Command::run([\PHP_BINARY, '-n', '-d', 'display_errors=stderr', '-d', 'extension=' . $so, '-r', 'echo extension_loaded("swoole") ? "loaded" : "";'], null, null, 30.0);
        if ($loaded['stdout'] !== 'loaded') {
            return "{$so} does not load in " . \PHP_BINARY . ' (built for another PHP?): bash tests/swoole.sh GIT_DIR rebuilds it; '
                . \trim((string) \strtok($loaded['stderr'], "\n"));
        }
        if (!\function_exists('posix_kill')) {
            return 'the swoole suite signals Swoole with posix_kill(): the posix extension is not loaded';
        }
        if (!\is_executable(self::SETSID)) {
            return 'the swoole suite starts Swoole in a session of its own with ' . self::SETSID . ' (util-linux), which is not installed';
        }

        return null;
    }

    /**
     * GET $script?$query over HTTP (JsonRequests).
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return array{status: int, headers: array<string, string>, body: string, error: string}
     */
    private function get(string $script, array $query): array
    {
        return HttpClient::get($this->port, $script, $query);
    }

    /**
     * Every request at once, a connection each (JsonRequests).
     *
     * @param list<array{string, array<string, scalar|list<string>>}> $requests [script, query] pairs
     * @return list<array{status: int, headers: array<string, string>, body: string, error: string}>
     */
    private function getAll(array $requests): array
    {
        return HttpClient::getAll($this->port, $requests);
    }
}
