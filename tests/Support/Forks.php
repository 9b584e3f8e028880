<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Children of the PHPUnit process made with pcntl_fork(), which share the extension's store as
 * php-fpm workers do, and start their work together.
 */
final class Forks
{
    /**
     * Forks $count children that run $work($index) at once, and returns their exit statuses in
     * order: the int $work returned (0 to 255), else 0; 1 when it threw; -1 when the child did not
     * exit normally.
     *
     * The children wait at a barrier: blocked reading one end of a socket pair whose other end
     * every process holds. The parent closes its copy once all are forked, each child its own
     * as it starts, so the read returns in all of them at once when the last one has started.
     *
     * @param callable(int): (int|void) $work
     * @return list<int>
     */
    public static function run(int $count, callable $work): array
    {
        $barrier = \stream_socket_pair(\STREAM_PF_UNIX, \STREAM_SOCK_STREAM, \STREAM_IPPROTO_IP);
        if ($barrier === false) {
            throw new \RuntimeException('stream_socket_pair() failed');
        }
        [$wait, $release] = $barrier;

        $pids = [];
        for ($index = 0; $index < $count; ++$index) {
            $pid = \pcntl_fork();
            if ($pid === -1) {
                \fclose($release);
                self::wait($pids);
                throw new \RuntimeException('pcntl_fork() failed');
            }
            if ($pid === 0) {
                $status = 1;
                try {
                    \fclose($release);
                    \fread($wait, 1);
                    $result = $work($index);
                    $status = \is_int($result) ? $result : 0;
                } catch (\Throwable $e) {
                    \fwrite(\STDERR, "child {$index}: {$e}\n");
                }
                Php::endForkedChild($status);
            }
            $pids[] = $pid;
        }
        \fclose($release);
        \fclose($wait);

        return self::wait($pids);
    }

    /**
     * @param list<int> $pids
     * @return list<int>
     */
    private static function wait(array $pids): array
    {
        $statuses = [];
        foreach ($pids as $pid) {
            \pcntl_waitpid($pid, $status);
            $statuses[] = \pcntl_wifexited($status) ? \pcntl_wexitstatus($status) : -1;
        }

        return $statuses;
    }
}
