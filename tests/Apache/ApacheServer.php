<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\JsonRequests;
use Zeusi\GaneshaShmAdapter\Tests\Support\LoadClients;
use Zeusi\GaneshaShmAdapter\Tests\Support\Loopback;
use Zeusi\GaneshaShmAdapter\Tests\Support\Php;
use Zeusi\GaneshaShmAdapter\Tests\Support\ProcFs;
use Zeusi\GaneshaShmAdapter\Tests\Support\StartingServer;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * An Apache of the tests' own: Debian's apache2 with the prefork MPM and mod_php
 * (libapache2-mod-php), `apache2 -f <conf> -DFOREGROUND`, with a configuration written into a
 * fresh temporary directory (ServerRoot, pid file, error log, php.ini, barriers), listening on a
 * free port of 127.0.0.1 and serving the scripts of tests/Apache/www. No system apache2 service
 * and none of /etc/apache2 is involved. Requests go over plain HTTP (HttpClient), their JSON
 * answers checked and decoded by JsonRequests.
 *
 * PHP starts in the Apache parent (mod_php's post_config hook), so the extension, loaded by the
 * server's own php.ini (`PHPIniDir`; PHP_INI_SCAN_DIR names an empty directory, so that nothing
 * of /etc/php/X.Y/apache2/conf.d is loaded, opcache included), creates its segment there, before
 * the children are forked: the same setup as a php-fpm master. On a graceful restart (SIGUSR1,
 * what `apachectl graceful` sends) the parent runs PHP's module shutdown and startup again in
 * the same process, unloading and loading the extension, while the old children finish the
 * requests they are serving.
 *
 * The parent runs in the foreground (-DFOREGROUND; not -X, which serves from the parent alone)
 * as a child of this process, so its pid is known without a race; it also writes a pid file.
 * It runs in a session of its own (detached()), so that its SIGTERM to its process group on
 * stopping reaches its children, not PHPUnit. Started as root, Apache runs its children as
 * www-data (else nobody): what they write (barriers) is in a directory of theirs. The server is
 * stopped by stop(): from the test's tearDown(), else from the destructor, else from a shutdown
 * function; and the kernel sends the parent SIGTERM when this process ends otherwise (even by
 * SIGKILL), so that no apache2 outlives the PHPUnit process that started it.
 */
final class ApacheServer
{
    use JsonRequests;
    use StartingServer;

    public const APACHE2 = '/usr/sbin/apache2';

    public const MODULES = '/usr/lib/apache2/modules';

    /** util-linux's, which runs a program in a session of its own (and without forking, here). */
    public const SETSID = '/usr/bin/setsid';

    /** util-linux's, which sets the parent death signal and runs a program. */
    public const SETPRIV = '/usr/bin/setpriv';

    private const START_TIMEOUT_S = 15.0;

    /** What the messages of StartingServer call the server's process. */
    private const PROCESS_NAME = 'apache2';

    private const STOP_TIMEOUT_S = 5.0;

    private const SIGHUP = 1;
    private const SIGKILL = 9;
    private const SIGTERM = 15;
    private const SIGUSR1 = 10;

    /** What Apache's error log says each time the parent has (re)started: AH00163. */
    private const RESUMING = 'resuming normal operations';

    /** @var resource|null the proc_open() handle of the parent */
    private $process;

    private int $pid;

    /** The PHPUnit process: forked children of it must not stop the server on their exit. */
    private int $owner;

    private static ?string $phpModule = null;

    /**
     * @param array<string, scalar> $ini the settings of PHP in the server's php.ini (see changeIni())
     * @param array{name: string, uid: int, gid: int, group: string}|null $user whom the children run
     *     as, when the parent is started as root
     * @param array{module: string, threads: int}|null $threaded the event MPM, its children serving
     *     on `threads` threads each, with that thread-safe mod_php; null: prefork and Debian's
     */
    private function __construct(
        public readonly string $dir,
        public readonly int $port,
        public readonly int $startServers,
        public readonly int $maxRequestWorkers,
        public array $ini,
        private readonly ?array $user,
        private readonly ?array $threaded = null,
    ) {
        $this->owner = \getmypid();
    }

    public function __destruct()
    {
        $this->stop();
    }

    /**
     * Why the apache suite cannot run here, or null when it can: apache2 with the prefork MPM
     * and mod_php of this PHP version are needed (.ci/install-deps installs apache2 and
     * libapache2-mod-php).
     */
    public static function missing(): ?string
    {
        if (!\is_executable(self::APACHE2) || !\is_file(self::MODULES . '/mod_mpm_prefork.so')) {
            return 'apache2 (' . self::APACHE2 . ', ' . self::MODULES . '/mod_mpm_prefork.so) is not installed: apt-get install apache2, as .ci/install-deps does';
        }
        if (self::phpModule() === null) {
            return \sprintf(
                'mod_php %d.%d (libapache2-mod-php%1$d.%2$d) is not installed: apt-get install libapache2-mod-php, as .ci/install-deps does',
                \PHP_MAJOR_VERSION,
                \PHP_MINOR_VERSION
            );
        }
        if (!\function_exists('posix_kill')) {
            return 'the apache suite signals apache2 with posix_kill(): the posix extension is not loaded';
        }
        if (!\is_executable(self::SETSID)) {
            return 'the apache suite starts apache2 in a session of its own with ' . self::SETSID . ' (util-linux), which is not installed';
        }
        if (\posix_geteuid() === 0 && self::childUser() === null) {
            return 'apache2 started as root runs its children as another user: there is no www-data nor nobody';
        }

        return null;
    }

    /**
     * mod_php of the PHP version running the tests (the extension is built for it): the
     * shared object libapache2-mod-phpX.Y installed (`dpkg -L`), else the one of Debian's path
     * (/usr/lib/apache2/modules/libphpX.Y.so); null when there is none.
     */
    public static function phpModule(): ?string
    {
        if (self::$phpModule !== null) {
            return self::$phpModule === '' ? null : self::$phpModule;
        }
        $version = \PHP_MAJOR_VERSION . '.' . \PHP_MINOR_VERSION;
        $candidates = [];
        if (Command::which('dpkg-query') !== null) {
            $listed = Command::run(['dpkg-query', '-L', "libapache2-mod-php{$version}"], null, null, 10.0);
            if ($listed['exit'] === 0) {
                foreach (\explode("\n", $listed['stdout']) as $file) {
                    if (\preg_match('/\/libphp[^\/]*\.so$/', $file) === 1) {
                        $candidates[] = $file;
                    }
                }
            }
        }
        $candidates[] = self::MODULES . "/libphp{$version}.so";
        self::$phpModule = '';
        foreach ($candidates as $candidate) {
            if (\is_file($candidate)) {
                self::$phpModule = $candidate;
                break;
            }
        }

        return self::$phpModule === '' ? null : self::$phpModule;
    }

    /** The URL path of tests/Apache/www/$name.php, a script the server serves. */
    public static function script(string $name): string
    {
        return '/' . $name . '.php';
    }

    /**
     * Starts a server and waits (bounded) until it is ready: its pid file written, its error
     * log saying it resumed normal operations, and $startServers children forked.
     *
     * The pool of children is kept at least $startServers strong (MinSpareServers) and may grow
     * to $maxRequestWorkers under load (and is never shrunk, MaxSpareServers being as large), so
     * that requests held at a barrier always find their children.
     *
     * With $threaded, the event MPM instead, with the thread-safe mod_php and extension it names
     * (the zts suite): $startServers children of `threads` threads each, all kept for the test.
     *
     * @param array<string, scalar> $ini more settings of PHP (e.g. ganesha_shm.path)
     * @param array<string, scalar> $directives more directives of Apache (e.g. MaxConnectionsPerChild)
     * @param array{module: string, extension: string, threads: int}|null $threaded
     */
    public static function start(array $ini = [], int $startServers = 4, int $maxRequestWorkers = 8, array $directives = [], ?array $threaded = null): self
    {
        $missing = $threaded === null ? self::missing() : null;
        if ($missing !== null) {
            throw new \LogicException($missing);
        }
        $user = \posix_geteuid() === 0 ? self::childUser() : null;
        if ($user !== null) {
            self::assertChildrenCanRead($user, __DIR__ . '/www');
        }
        $dir = TempDir::create('ganesha-shm-apache-');
        // the children reach their own directory below it, and nothing else of it
        \chmod($dir, 0711);
        \mkdir($dir . '/run', 0700);
        if ($user !== null) {
            \chown($dir . '/run', $user['uid']);
            \chgrp($dir . '/run', $user['gid']);
        }
        $settings = [
            'extension' => $threaded['extension'] ?? Php::extensionPath(),
            'error_reporting' => '-1',
            'display_errors' => '0',
            'html_errors' => '0',
            // to Apache's error log
            'log_errors' => '1',
        ] + $ini;
        $server = new self($dir, Loopback::freePort(), $startServers, $maxRequestWorkers, $settings, $user,
            $threaded === null ? null : ['module' => $threaded['module'], 'threads' => $threaded['threads']]);
        \file_put_contents($dir . '/php.ini', self::phpIni($settings));
        \file_put_contents($dir . '/apache2.conf', $server->config($directives));

        $command = [...self::detached(), self::APACHE2, '-f', $dir . '/apache2.conf', '-DFOREGROUND'];
        // GANESHA_DIR (tests/autoload.php) reaches the scripts' getenv() from this environment;
        // an empty directory to scan instead of the compiled-in /etc/php/X.Y/apache2/conf.d
        // (proc_open() drops a variable whose value is empty)
        \mkdir($dir . '/conf.d', 0700);
        $env = Command::env(['PHP_INI_SCAN_DIR' => $dir . '/conf.d']);
        $out = $dir . '/apache2.out';
        $process = \proc_open($command, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $out, 'a'], 2 => ['file', $out, 'a']], $pipes, $dir, $env);
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
            $server->waitUntil('apache2 to start', fn (): bool => \is_file($dir . '/apache2.pid')
                && \substr_count($server->apacheLog(), self::RESUMING) >= 1
                && \count($server->childPids()) >= $startServers);
            $pidFile = (int) \trim((string) \file_get_contents($dir . '/apache2.pid'));
            if ($pidFile !== $server->pid) {
                throw new \RuntimeException("apache2's pid file says {$pidFile}, the process started is {$server->pid}");
            }
        } catch (\Throwable $e) {
            $server->stop();
            throw $e;
        }

        return $server;
    }

    /**
     * Changes settings of the server's php.ini, read by PHP's next startup in the parent (the
     * next graceful restart).
     *
     * @param array<string, scalar> $ini
     */
    public function changeIni(array $ini): void
    {
        $this->ini = $ini + $this->ini;
        \file_put_contents($this->dir . '/php.ini', self::phpIni($this->ini));
    }

    /**
     * Sends a request and returns without waiting for its answer; collect it with
     * collectJson().
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return array{socket: resource|null, buffer: string, what: string, error: string, deadline: float}
     */
    public function send(string $script, array $query = []): array
    {
        return HttpClient::send($this->port, $script, $query);
    }

    /**
     * The JSON answer of a request send() sent.
     *
     * @param array{socket: resource|null, buffer: string, what: string, error: string, deadline: float} $pending
     * @return array<string, mixed>
     */
    public function collectJson(array $pending): array
    {
        return $this->decodeAll(HttpClient::finish([$pending]))[0];
    }

    /**
     * The query parameters of a barrier for $parties requests: a script given them waits
     * (bounded, 10 s) until $parties requests have reached it (tests/Fpm/FpmScript::barrier()),
     * each marking its arrival with a file named by its pid in the barrier's directory, so
     * those requests are served at the same time, by $parties distinct children.
     *
     * @return array{barrier: string, parties: int}
     */
    public function barrier(int $parties): array
    {
        $dir = $this->dir . '/run/barrier-' . \bin2hex(\random_bytes(5));
        if (!\mkdir($dir, 0700)) {
            throw new \RuntimeException("Could not create {$dir}");
        }
        if ($this->user !== null) {
            \chown($dir, $this->user['uid']);
            \chgrp($dir, $this->user['gid']);
        }

        return ['barrier' => $dir, 'parties' => $parties];
    }

    /**
     * The pids of the children that reached a barrier so far (its files), sorted.
     *
     * @param array{barrier: string, parties: int} $barrier
     * @return list<int>
     */
    public static function arrivals(array $barrier): array
    {
        $pids = \array_map(static fn (string $file): int => (int) \basename($file), \glob($barrier['barrier'] . '/[0-9]*') ?: []);
        \sort($pids);

        return $pids;
    }

    /**
     * Runs $clients load clients at once (load()) and waits for them: $requests requests each,
     * within $seconds seconds. Returns what each client counted.
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return list<array{sent: int, ok: int, failed: int, pids: array<int, int>, errors: list<string>, seconds: float}>
     */
    public function clients(int $clients, string $script, array $query, int $requests, float $seconds = 30.0): array
    {
        return $this->load($clients, $script, $query, $requests, $seconds)->finish();
    }

    /**
     * Starts $clients load clients in the background (LoadClients of tests/Apache/client.php,
     * each a `php -n` process sending requests one after the other over HTTP): $requests
     * requests each at most, for $seconds seconds at most, or until their stop().
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     */
    public function load(int $clients, string $script, array $query, int $requests, float $seconds): LoadClients
    {
        $job = ['port' => $this->port, 'path' => $script, 'query' => $query];

        return new LoadClients(__DIR__ . '/client.php', $job, $clients, $requests, $seconds);
    }

    public function parentPid(): int
    {
        return $this->pid;
    }

    /**
     * The parent's children, read from /proc; sorted. With the prefork MPM, every child of the
     * parent is a server process (no CGI daemon, no piped logger is configured).
     *
     * @return list<int>
     */
    public function childPids(): array
    {
        return ProcFs::children($this->pid);
    }

    /**
     * A graceful restart, as `apachectl graceful` does it: SIGUSR1 to the parent, which tells
     * its children to finish the request they serve and exit, runs PHP's module shutdown and
     * startup again (re-reading its configuration), and forks new children as the old ones
     * exit. Waits (bounded) until it is done: the error log says the parent resumed normal
     * operations once more, a request is served by a child of the new generation (a pid not
     * among the children before the signal) and, with $untilOldChildrenGone, no child of the old
     * generation is left.
     *
     * @return float the seconds it took
     */
    public function graceful(bool $untilOldChildrenGone = true): float
    {
        return $this->restartWith(self::SIGUSR1, 'a graceful restart', $untilOldChildrenGone);
    }

    /**
     * A restart, as `apachectl restart` does it: SIGHUP to the parent, which ends its children
     * at once (a request they serve is cut), and otherwise restarts as graceful() does. Waits
     * (bounded) until a child of the new generation serves and none of the old one is left.
     *
     * @return float the seconds it took
     */
    public function restart(): float
    {
        return $this->restartWith(self::SIGHUP, 'a restart', true);
    }

    private function restartWith(int $signal, string $what, bool $untilOldChildrenGone): float
    {
        $started = \microtime(true);
        $old = $this->childPids();
        $resumed = \substr_count($this->apacheLog(), self::RESUMING);
        if (!\posix_kill($this->pid, $signal)) {
            throw new \RuntimeException("Could not signal the apache2 parent {$this->pid}");
        }
        $this->waitUntil("{$what} to complete", function () use ($old, $resumed, $untilOldChildrenGone): bool {
            if (\substr_count($this->apacheLog(), self::RESUMING) <= $resumed) {
                return false;
            }
            if ($untilOldChildrenGone && \array_intersect($this->childPids(), $old) !== []) {
                return false;
            }
            $answer = HttpClient::get($this->port, self::script('native'), ['op' => 'info']);
            $pid = $answer['error'] === '' ? (\json_decode($answer['body'], true)['pid'] ?? null) : null;

            return \is_int($pid) && !\in_array($pid, $old, true);
        });

        return \microtime(true) - $started;
    }

    /**
     * How many mappings of a ganesha_shm segment the parent has (ProcFs::segmentMappings(): the
     * memfd of an anonymous segment, or the file of ganesha_shm.path).
     */
    public function segmentMappings(): int
    {
        $path = $this->ini['ganesha_shm.path'] ?? null;

        return ProcFs::segmentMappings($this->pid, $path === null ? null : (string) $path);
    }

    /**
     * The memory the parent's segment mappings keep alive, in kB (ProcFs::segmentBlocksKb()), or
     * null when /proc/<pid>/map_files cannot be read (not root).
     */
    public function segmentBlocksKb(): ?int
    {
        $path = $this->ini['ganesha_shm.path'] ?? null;

        return ProcFs::segmentBlocksKb($this->pid, $path === null ? null : (string) $path);
    }

    /** The parent's RssShmem (/proc/<pid>/status), in kB: the shared memory it has touched. */
    public function rssShmemKb(): int
    {
        return ProcFs::statusKb($this->pid, 'RssShmem');
    }

    /** Apache's error log (the parent's notices, and PHP's errors) and what apache2 printed. */
    public function errorLog(): string
    {
        $log = '';
        foreach (['error.log', 'apache2.out'] as $file) {
            $contents = @\file_get_contents($this->dir . '/' . $file);
            if (\is_string($contents) && $contents !== '') {
                $log .= "--- {$file}\n" . (\strlen($contents) > 20_000 ? '…' . \substr($contents, -20_000) : $contents);
            }
        }

        return $log === '' ? '(the logs are empty)' : $log;
    }

    /** Apache's error log. */
    public function apacheLog(): string
    {
        return (string) @\file_get_contents($this->dir . '/error.log');
    }

    /**
     * Ends the parent and its children (SIGTERM to the parent, which stops its children; SIGKILL
     * to whatever is left after 5 s) and removes the temporary directory. Returns whether
     * SIGTERM alone ended them all. Idempotent (true once stopped); does nothing in a forked
     * child of the PHPUnit process.
     */
    public function stop(): bool
    {
        if ($this->process === null || \getmypid() !== $this->owner) {
            return true;
        }
        $process = $this->process;
        $this->process = null;
        $children = $this->childPids();
        $pidFile = (int) @\file_get_contents($this->dir . '/apache2.pid');
        $parents = \array_unique(\array_filter([$this->pid, $pidFile]));
        foreach ($parents as $pid) {
            @\posix_kill($pid, self::SIGTERM);
        }
        $deadline = \microtime(true) + self::STOP_TIMEOUT_S;
        $left = static fn (): array => \array_filter([...$parents, ...$children], static fn (int $pid): bool => ProcFs::alive($pid));
        while (($running = \proc_get_status($process)['running']) || $left() !== []) {
            if (\microtime(true) > $deadline) {
                break;
            }
            \usleep(10_000);
        }
        $clean = !$running && $left() === [];
        foreach ($left() as $pid) {
            @\posix_kill($pid, self::SIGKILL);
        }
        \proc_close($process);
        TempDir::remove($this->dir);

        return $clean;
    }

    /** @param array<string, scalar> $directives more directives */
    private function config(array $directives): string
    {
        $www = __DIR__ . '/www';
        $threads = $this->threaded['threads'] ?? 0;
        $settings = $directives + ($this->threaded === null ? [
            'StartServers' => $this->startServers,
            'MinSpareServers' => $this->startServers,
            'MaxSpareServers' => \max($this->maxRequestWorkers, $this->startServers + 1),
            'ServerLimit' => \max($this->maxRequestWorkers, $this->startServers),
            'MaxRequestWorkers' => \max($this->maxRequestWorkers, $this->startServers),
        ] : [
            // exactly $startServers children: no spare-thread bound makes the parent add or end one
            'StartServers' => $this->startServers,
            'ServerLimit' => $this->startServers,
            'ThreadLimit' => $threads,
            'ThreadsPerChild' => $threads,
            'MaxRequestWorkers' => $this->startServers * $threads,
            'MinSpareThreads' => 1,
            'MaxSpareThreads' => $this->startServers * $threads,
        ]) + [
            'MaxConnectionsPerChild' => 0,
            'KeepAlive' => 'Off',
            'Timeout' => 30,
        ];
        $mpm = $this->threaded === null ? 'prefork' : 'event';
        $lines = [
            '# written by tests/Apache/ApacheServer.php',
            'ServerRoot ' . self::quote($this->dir),
            'DefaultRuntimeDir ' . self::quote($this->dir),
            'PidFile ' . self::quote($this->dir . '/apache2.pid'),
            'ErrorLog ' . self::quote($this->dir . '/error.log'),
            'LogLevel notice',
            'ServerName 127.0.0.1',
            'Listen 127.0.0.1:' . $this->port,
            "LoadModule mpm_{$mpm}_module " . self::quote(self::MODULES . "/mod_mpm_{$mpm}.so"),
            // without an authorization module, core refuses every request ("couldn't check user")
            'LoadModule authz_core_module ' . self::quote(self::MODULES . '/mod_authz_core.so'),
            'LoadModule php_module ' . self::quote($this->threaded['module'] ?? (string) self::phpModule()),
            'PHPIniDir ' . self::quote($this->dir),
        ];
        if ($this->user !== null) {
            $lines[] = 'User ' . $this->user['name'];
            $lines[] = 'Group ' . $this->user['group'];
        }
        foreach ($settings as $name => $value) {
            $lines[] = $name . ' ' . $value;
        }
        \array_push(
            $lines,
            'DocumentRoot ' . self::quote($www),
            '<Directory ' . self::quote($www) . '>',
            '    Require all granted',
            '</Directory>',
            '<FilesMatch "\.php$">',
            '    SetHandler application/x-httpd-php',
            '</FilesMatch>',
        );

        return \implode("\n", $lines) . "\n";
    }

    /** @param array<string, scalar> $settings */
    private static function phpIni(array $settings): string
    {
        $lines = ['; written by tests/Apache/ApacheServer.php'];
        foreach ($settings as $name => $value) {
            $value = (string) $value;
            if (\preg_match('/["\n]/', $value) === 1) {
                throw new \InvalidArgumentException("Cannot write {$name}={$value} into php.ini");
            }
            $lines[] = $name . ' = "' . $value . '"';
        }

        return \implode("\n", $lines) . "\n";
    }

    private static function quote(string $value): string
    {
        if (\preg_match('/["\n\\\\]/', $value) === 1) {
            throw new \InvalidArgumentException("Cannot write {$value} into apache2.conf");
        }

        return '"' . $value . '"';
    }

    /**
     * The user Apache started as root runs its children as: www-data, else nobody; null when
     * there is neither.
     *
     * @return array{name: string, uid: int, gid: int, group: string}|null
     */
    private static function childUser(): ?array
    {
        foreach (['www-data', 'nobody'] as $name) {
            $user = \posix_getpwnam($name);
            if (\is_array($user)) {
                $group = \posix_getgrgid($user['gid']);

                return ['name' => $name, 'uid' => $user['uid'], 'gid' => $user['gid'], 'group' => \is_array($group) ? $group['name'] : '#' . $user['gid']];
            }
        }

        return null;
    }

    /**
     * Fails, saying why, unless the children (running as $user) can reach $dir: every directory
     * above it must let others (or that user) through, as a checkout under /root does not.
     *
     * @param array{name: string, uid: int, gid: int, group: string} $user
     */
    private static function assertChildrenCanRead(array $user, string $dir): void
    {
        for ($path = $dir; ; $path = \dirname($path)) {
            $stat = @\stat($path);
            $mode = \is_array($stat) ? $stat['mode'] : 0;
            $through = ($mode & 0001) !== 0
                || (\is_array($stat) && $stat['uid'] === $user['uid'] && ($mode & 0100) !== 0)
                || (\is_array($stat) && $stat['gid'] === $user['gid'] && ($mode & 0010) !== 0);
            if (!$through) {
                throw new \RuntimeException(\sprintf(
                    'Apache runs its children as %s, who cannot enter %s (mode %o): they could not read the scripts of %s',
                    $user['name'],
                    $path,
                    $mode & 07777,
                    $dir
                ));
            }
            if ($path === \dirname($path)) {
                return;
            }
        }
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
     * @param list<array{string, array<string, scalar|list<string>>}> $requests [path, query] pairs
     * @return list<array{status: int, headers: array<string, string>, body: string, error: string}>
     */
    private function getAll(array $requests): array
    {
        return HttpClient::getAll($this->port, $requests);
    }
}
