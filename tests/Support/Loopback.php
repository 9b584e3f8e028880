<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * The loopback interface, where the servers the tests start listen.
 */
final class Loopback
{
    /** A TCP port of 127.0.0.1 that nothing listens on right now, for a server a test starts. */
    public static function freePort(): int
    {
        $socket = \stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
        if ($socket === false) {
            throw new \RuntimeException("No free port: {$error}");
        }
        $name = (string) \stream_socket_get_name($socket, false);
        \fclose($socket);

        return (int) \substr($name, \strrpos($name, ':') + 1);
    }
}
