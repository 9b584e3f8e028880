<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use Zeusi\GaneshaShmAdapter\Tests\Support\JsonRequests;
use Zeusi\GaneshaShmAdapter\Tests\Support\LoadClients;
use Zeusi\GaneshaShmAdapter\Tests\Support\Loopback;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\ProcFs;
use Zeusi\GaneshaShmAdapter\Tests\Support\StartingServer;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * A php-fpm master of the tests' own: `php-fpm -n -F -y <conf> -d extension=<the extension>`,
 * with a configuration written into a fresh temporary directory (pid file, logs, barriers),
 * one pool listening on a free port of 127.0.0.1 and serving the scripts of tests/Fpm/www.
 *
 * The master loads the extension at startup, before it forks its workers: the setup the
 * adapter is made for. Requests go through a real FastCGI client (FastCgiClient, cgi-fcgi),
 * their JSON answers checked and decoded by JsonRequests.
 *
 * The master runs in the foreground (-F) as a child of this process, so its pid is known
 * without a race; it also writes a pid file. It is stopped by stop(): from the test's
 * tearDown(), else from the destructor, else from a shutdown function, so that no php-fpm
 * outlives the PHPUnit process that started it (short of a SIGKILL of that process).
 */
final class FpmServer
{
    use JsonRequests;
    use StartingServer;

    private const START_TIMEOUT_S = 10.0;

    /** What the messages of StartingServer call the server's process. */
    private const PROCESS_NAME = 'php-fpm';

    private const SIGKILL = 9;
    private const SIGTERM = 15;
    private const SIGUSR2 = 12;

    /** @var resource|null the proc_open() handle of the master */
    private $process;

    private int $pid;

    /** The PHPUnit process: forked children of it must not stop the server on their exit. */
    private int $owner;

    private function __construct(
        public readonly string $dir,
        public readonly int $port,
        public readonly string $pm,
        public readonly int $maxChildren,
    ) {
        $this->owner = \getmypid();
    }

    public function __destruct()
    {
        $this->stop();
    }

    /**
     * Why the fpm suite cannot run here, or null when it can: php-fpm of this PHP version and
     * cgi-fcgi are needed (.ci/install-deps installs php-fpm and libfcgi-bin).
     */
    public static function missing(): ?string
    {
        if (self::binary() === null) {
            return \sprintf(
                'php-fpm %d.%d is not installed (/usr/sbin/php-fpm%1$d.%2$d): apt-get install php-fpm, as .ci/install-deps does',
                \PHP_MAJOR_VERSION,
                \PHP_MINOR_VERSION
            );
        }
        if (!\is_executable(FastCgiClient::CGI_FCGI)) {
            return 'cgi-fcgi, the FastCGI client the fpm suite sends its requests with, is not installed: apt-get install libfcgi-bin, as .ci/install-deps does';
        }
        if (!\function_exists('posix_kill')) {
            return 'the fpm suite signals php-fpm with posix_kill(): the posix extension is not loaded';
        }

        return null;
    }

    /** The php-fpm of the PHP version running the tests: the extension is built for it. */
    public static function binary(): ?string
    {
        $version = \PHP_MAJOR_VERSION . '.' . \PHP_MINOR_VERSION;
        foreach (["/usr/sbin/php-fpm{$version}", "/usr/local/sbin/php-fpm{$version}"] as $candidate) {
            if (\is_file($candidate) && \is_executable($candidate)) {
                return $candidate;
            }
        }

        return null;
    }

    /** The absolute path of tests/Fpm/www/$name.php, a script the pool serves. */
    public static function script(string $name): string
    {
        return __DIR__ . '/www/' . $name . '.php';
    }

    /**
     * Starts a master and waits (bounded) until it is ready: its socket listens and, with
     * pm=static, the port answers and all its workers are forked.
     *
     * @param array<string, scalar> $ini more -d settings of PHP (e.g. ganesha_shm.max_services)
     * @param 'static'|'ondemand' $pm
     * @param array<string, scalar> $pool more directives of the pool (e.g. pm.max_requests,
     *     request_terminate_timeout)
     */
    public static function start(array $ini = [], string $pm = 'static', int $maxChildren = 4, array $pool = []): self
    {
        $missing = self::missing();
        if ($missing !== null) {
            throw new \LogicException($missing);
        }
        $dir = TempDir::create('ganesha-shm-fpm-');
        $server = new self($dir, Loopback::freePort(), $pm, $maxChildren);
        \file_put_contents($dir . '/php-fpm.conf', $server->config($pool));

        $command = [self::binary(), '-n', '-F', '-y', $dir . '/php-fpm.conf'];
        if (\function_exists('posix_geteuid') && \posix_geteuid() === 0) {
            $command[] = '-R'; // as root (CI containers); the workers run as root too
        }
        $settings = [
            'extension' => Php::extensionPath(),
            'error_reporting' => '-1',
            'display_errors' => '0',
            'log_errors' => '1',
            'error_log' => $dir . '/php-errors.log',
        ] + $ini;
        foreach ($settings as $name => $value) {
            $command[] = '-d';
            $command[] = $name . '=' . $value;
        }
        $log = $dir . '/php-fpm.out';
        $process = \proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']], $pipes, $dir);
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
            // the master logs that it is ready once its socket listens; a connection to probe the
            // port would make a pm=ondemand master fork a worker, so only pm=static pools are probed
            $server->waitUntil('php-fpm to start', fn (): bool => \is_file($dir . '/php-fpm.pid')
                && \str_contains($server->fpmLog(), 'ready to handle connections')
                && ($pm !== 'static' || $server->answers()));
            $pidFile = (int) \trim((string) \file_get_contents($dir . '/php-fpm.pid'));
            if ($pidFile !== $server->pid) {
                throw new \RuntimeException("php-fpm's pid file says {$pidFile}, the process started is {$server->pid}");
            }
            if ($pm === 'static') {
                $server->waitUntil("{$maxChildren} workers", fn (): bool => \count($server->workerPids()) === $maxChildren);
            }
        } catch (\Throwable $e) {
            $server->stop();
            throw $e;
        }

        return $server;
    }

    /**
     * The query parameters of a barrier for $parties requests: a script given them waits
     * (bounded) until $parties requests have reached it (FpmScript::barrier()), so those
     * requests are being served at the same time, by $parties distinct workers.
     *
     * @return array{barrier: string, parties: int}
     */
    public function barrier(int $parties): array
    {
        $dir = $this->dir . '/barrier-' . \bin2hex(\random_bytes(5));
        if (!\mkdir($dir, 0700)) {
            throw new \RuntimeException("Could not create {$dir}");
        }

        return ['barrier' => $dir, 'parties' => $parties];
    }

    /**
     * Runs $clients load clients at once (LoadClients of tests/Fpm/client.php, each a `php -n`
     * process sending requests one after the other through cgi-fcgi) and waits for them:
     * $requests requests each, or as many as they can for $seconds seconds. Returns what each
     * client counted.
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return list<array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}>
     */
    public function clients(int $clients, string $script, array $query, ?int $requests = null, ?float $seconds = null): array
    {
        $job = ['port' => $this->port, 'script' => $script, 'query' => $query];

        return (new LoadClients(__DIR__ . '/client.php', $job, $clients, $requests, $seconds))->finish();
    }

    public function masterPid(): int
    {
        return $this->pid;
    }

    /**
     * The master's children, its workers, read from /proc; sorted.
     *
     * @return list<int>
     */
    public function workerPids(): array
    {
        return ProcFs::children($this->pid);
    }

    /**
     * Reloads php-fpm as `systemctl reload` does: SIGUSR2 to the master, which stops its
     * workers, then execs itself (keeping its pid and its listening socket) and forks new
     * ones. Waits (bounded) until every worker is new, and the port answers.
     */
    public function reload(): void
    {
        $old = $this->workerPids();
        $ready = \substr_count($this->fpmLog(), 'ready to handle connections');
        if (!\posix_kill($this->pid, self::SIGUSR2)) {
            throw new \RuntimeException("Could not signal the php-fpm master {$this->pid}");
        }
        $this->waitUntil('php-fpm to reload with new workers', function () use ($old, $ready): bool {
            $workers = $this->workerPids();

            return \array_intersect($workers, $old) === []
                && ($this->pm !== 'static' || \count($workers) === $this->maxChildren)
                && \substr_count($this->fpmLog(), 'ready to handle connections') > $ready
                && $this->answers();
        });
    }

    /** php-fpm's own log (the master's notices, and the workers' output) and PHP's error log. */
    public function errorLog(): string
    {
        $log = '';
        foreach (['php-fpm.log', 'php-fpm.out', 'php-errors.log'] as $file) {
            $contents = @\file_get_contents($this->dir . '/' . $file);
            if (\is_string($contents) && $contents !== '') {
                $log .= "--- {$file}\n{$contents}";
            }
        }

        return $log === '' ? '(the logs are empty)' : $log;
    }

    /** php-fpm's own log: the master's notices and warnings. */
    public function fpmLog(): string
    {
        return (string) @\file_get_contents($this->dir . '/php-fpm.log');
    }

    /**
     * Ends the master and its workers (SIGTERM, then SIGKILL after 5 s) and removes the
     * temporary directory. Idempotent; does nothing in a forked child of the PHPUnit process.
     */
    public function stop(): void
    {
        if ($this->process === null || \getmypid() !== $this->owner) {
            return;
        }
        $process = $this->process;
        $this->process = null;
        $workers = $this->workerPids();
        $pidFile = (int) @\file_get_contents($this->dir . '/php-fpm.pid');
        $masters = \array_unique(\array_filter([$this->pid, $pidFile]));
        foreach ($masters as $pid) {
            @\posix_kill($pid, self::SIGTERM);
        }
        $deadline = \microtime(true) + 5.0;
        while (\proc_get_status($process)['running'] && \microtime(true) < $deadline) {
            \usleep(10_000);
        }
        foreach ([...$masters, ...$workers] as $pid) {
            if (@\posix_kill($pid, 0)) {
                @\posix_kill($pid, self::SIGKILL);
            }
        }
        \proc_close($process);
        TempDir::remove($this->dir);
    }

    /** @param array<string, scalar> $directives more directives of the pool */
    private function config(array $directives): string
    {
        $pool = $directives + [
            'listen' => '127.0.0.1:' . $this->port,
            'pm' => $this->pm,
            'pm.max_children' => $this->maxChildren,
            'catch_workers_output' => 'yes',
            'decorate_workers_output' => 'no',
            // a script that hangs is ended; the tests' own bounds are shorter
            'request_terminate_timeout' => '60s',
        ];
        if ($this->pm === 'ondemand') {
            $pool['pm.process_idle_timeout'] = '3s';
        }
        // tests/autoload.php finds Ganesha there when it is not in vendor/; php-fpm clears the
        // environment of its workers (clear_env=yes) but for what the pool passes
        $ganeshaDir = \getenv('GANESHA_DIR');
        if (\is_string($ganeshaDir) && $ganeshaDir !== '') {
            $pool['env[GANESHA_DIR]'] = $ganeshaDir;
        }

        $lines = [
            '[global]',
            'pid = ' . $this->dir . '/php-fpm.pid',
            'error_log = ' . $this->dir . '/php-fpm.log',
            'log_level = notice',
            '',
            '[ganesha_shm_tests]',
        ];
        foreach ($pool as $name => $value) {
            $lines[] = $name . ' = ' . $value;
        }

        return \implode("\n", $lines) . "\n";
    }

    /** Whether the port accepts a connection. */
    private function answers(): bool
    {
        $socket = @\stream_socket_client('tcp://127.0.0.1:' . $this->port, $errno, $error, 0.2);
        if ($socket === false) {
            return false;
        }
        \fclose($socket);

        return true;
    }

    /**
     * GET $script?$query through cgi-fcgi (JsonRequests).
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return array{status: int, headers: array<string, string>, body: string, error: string}
     */
    private function get(string $script, array $query): array
    {
        return FastCgiClient::get($this->port, $script, $query);
    }

    /**
     * Every request at once, a cgi-fcgi process each (JsonRequests).
     *
     * @param list<array{string, array<string, scalar|list<string>>}> $requests [script, query] pairs
     * @return list<array{status: int, headers: array<string, string>, body: string, error: string}>
     */
    private function getAll(array $requests): array
    {
        return FastCgiClient::getAll($this->port, $requests);
    }
}
