<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * What the tests' servers (FpmServer, ApacheServer, SwooleServer) share while they start and
 * restart: a condition polled until it holds, for at most the class's START_TIMEOUT_S seconds,
 * failing with the server's logs at once if its process (`$process`, the proc_open() handle of
 * the process the test started) exited. The class names its server in PROCESS_NAME.
 */
trait StartingServer
{
    /** The server's logs, for failure messages. */
    abstract public function errorLog(): string;

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
