<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * What the tests' servers (FpmServer, ApacheServer, SwooleServer) share while they start and
 * restart: a condition polled until it holds, for at most the class's START_TIMEOUT_S seconds,
 * failing with the server's logs at once if its process (`$process`, the proc_open() handle of
 * the process the test started) exited. The class names its server in PROCESS_NAME; one that
 * starts its server detached() names setsid and setpriv in SETSID and SETPRIV.
 */
trait StartingServer
{
    /** The server's logs, for failure messages. */
    abstract public function errorLog(): string;

    /**
     * What runs a server apart from this process's process group: on stopping (and on a full
     * restart) Apache's prefork parent and Swoole's master send SIGTERM to their whole process
     * group, which would otherwise be PHPUnit's. setsid() gives it a group of its own, in the
     * same process (this process's child is no group leader, so setsid does not fork); setpriv,
     * where it exists, makes the kernel send it SIGTERM when this process ends, even by SIGKILL
     * or Ctrl-C, which no longer reach it through the terminal.
     *
     * @return list<string>
     */
    private static function detached(): array
    {
        $command = [self::SETSID];
        if (\is_executable(self::SETPRIV)) {
            \array_push($command, self::SETPRIV, '--pdeathsig', 'TERM');
        }

        return $command;
    }

    /** Polls $condition until it holds; fails with the logs after START_TIMEOUT_S seconds or if the server's process exited. */
    private function waitUntil(string $what, callable $condition): void
    {
        $deadline = \microtime(true) + self::START_TIMEOUT_S;
        while (!$condition()) {
            if ($this->process === null || !\proc_get_status($this->process)['running']) {
                throw new \RuntimeException(self::PROCESS_NAME . " exited while waiting for {$what}\n" . $this->errorLog());
            }
            if (\microtime(true) > $deadline) {
                throw new \RuntimeException(\sprintf("Waited %.0f s for %s\n%s", self::START_TIMEOUT_S, $what, $this->errorLog()));
            }
            \usleep(20_000);
        }
    }
}
