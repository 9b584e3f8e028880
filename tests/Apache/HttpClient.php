<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

/**
 * Plain HTTP/1.0 requests to 127.0.0.1 over stream sockets (the curl extension may be
 * absent): one connection per request, `Connection: close`, the answer read until the server
 * closes it. Requests can be sent at once and their answers collected together, so that
 * several Apache children serve them at the same time.
 *
 * No dependency on other classes: tests/Apache/client.php, the load clients, requires this
 * file and tests/Support/LoadClient.php alone.
 */
final class HttpClient
{
    /** Seconds a request may take (connection included) before it is reported failed. */
    public const TIMEOUT_S = 30.0;

    private const CONNECT_TIMEOUT_S = 5.0;

    /**
     * GET $path?$query from 127.0.0.1:$port.
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return array{status: int, headers: array<string, string>, body: string, error: string}
     *     error '' for a 200 with a body; status 0 when no HTTP answer came (connection
     *     refused or reset, timeout)
     */
    public static function get(int $port, string $path, array $query = []): array
    {
        return self::finish([self::send($port, $path, $query)])[0];
    }

    /**
     * Sends every request at once, then collects the answers, in order.
     *
     * @param list<array{string, array<string, scalar|list<string>>}> $requests [path, query] pairs
     * @return list<array{status: int, headers: array<string, string>, body: string, error: string}>
     */
    public static function getAll(int $port, array $requests): array
    {
        return self::finish(\array_map(static fn (array $request): array => self::send($port, $request[0], $request[1]), $requests));
    }

    /**
     * Connects and sends the request, without waiting for the answer (finish() collects it).
     * Loopback connections are established by the kernel even while every child is busy, so
     * the request waits in the listen queue.
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return array{socket: resource|null, buffer: string, what: string, error: string, deadline: float}
     */
    public static function send(int $port, string $path, array $query = []): array
    {
        $queryString = \http_build_query($query);
        $target = $path . ($queryString === '' ? '' : '?' . $queryString);
        $pending = ['socket' => null, 'buffer' => '', 'what' => 'GET ' . $target, 'error' => '', 'deadline' => \microtime(true) + self::TIMEOUT_S];
        $socket = @\stream_socket_client("tcp://127.0.0.1:{$port}", $errno, $error, self::CONNECT_TIMEOUT_S);
        if ($socket === false) {
            $pending['error'] = "connect to 127.0.0.1:{$port}: {$error} ({$errno})";

            return $pending;
        }
        $request = "GET {$target} HTTP/1.0\r\nHost: 127.0.0.1:{$port}\r\nConnection: close\r\n\r\n";
        $written = @\fwrite($socket, $request);
        if ($written !== \strlen($request)) {
            \fclose($socket);
            $pending['error'] = 'could not send the request';

            return $pending;
        }
        \stream_set_blocking($socket, false);
        $pending['socket'] = $socket;

        return $pending;
    }

    /**
     * Reads the answers of requests send() sent until the server closes each connection (each
     * bounded by TIMEOUT_S from its sending), and parses them; in order.
     *
     * @param list<array{socket: resource|null, buffer: string, what: string, error: string, deadline: float}> $pending
     * @return list<array{status: int, headers: array<string, string>, body: string, error: string}>
     */
    public static function finish(array $pending): array
    {
        $answers = [];
        $open = [];
        foreach ($pending as $i => $request) {
            if ($request['socket'] === null) {
                $answers[$i] = self::parse($request, false);
            } else {
                $open[$i] = $request;
            }
        }
        while ($open !== []) {
            $now = \microtime(true);
            $read = [];
            foreach ($open as $i => $request) {
                if ($now >= $request['deadline']) {
                    \fclose($request['socket']);
                    $answers[$i] = self::parse($request, true);
                    unset($open[$i]);
                } else {
                    $read[$i] = $request['socket'];
                }
            }
            if ($read === []) {
                break;
            }
            $wait = \min(\array_column($open, 'deadline')) - $now;
            $write = $except = null;
            if (@\stream_select($read, $write, $except, 0, \max(1_000, (int) ($wait * 1e6))) === false) {
                \usleep(1_000);
                continue;
            }
            // stream_select() keeps the keys of the streams that are ready
            foreach ($read as $i => $socket) {
                $chunk = @\fread($socket, 65536);
                if (\is_string($chunk) && $chunk !== '') {
                    $open[$i]['buffer'] .= $chunk;
                } elseif (\feof($socket) || $chunk === false) {
                    \fclose($socket);
                    $answers[$i] = self::parse($open[$i], false);
                    unset($open[$i]);
                }
            }
        }
        \ksort($answers);

        return \array_values($answers);
    }

    /**
     * @param array{socket: resource|null, buffer: string, what: string, error: string, deadline: float} $request
     * @return array{status: int, headers: array<string, string>, body: string, error: string}
     */
    private static function parse(array $request, bool $timedOut): array
    {
        $answer = ['status' => 0, 'headers' => [], 'body' => '', 'error' => ''];
        if ($request['error'] !== '') {
            $answer['error'] = $request['what'] . ': ' . $request['error'];

            return $answer;
        }
        $output = $request['buffer'];
        $end = \strpos($output, "\r\n\r\n");
        if ($timedOut || $end === false || \preg_match('/^HTTP\/1\.[01] (\d{3})/', $output, $m) !== 1) {
            $answer['error'] = \sprintf(
                '%s: %s (%d bytes of output) %s',
                $request['what'],
                $timedOut ? \sprintf('no answer within %.0f s', self::TIMEOUT_S) : 'no HTTP answer',
                \strlen($output),
                \substr($output, 0, 500)
            );

            return $answer;
        }
        $answer['status'] = (int) $m[1];
        foreach (\array_slice(\explode("\r\n", \substr($output, 0, $end)), 1) as $line) {
            [$name, $value] = \array_map('trim', \explode(':', $line, 2)) + [1 => ''];
            $answer['headers'][\strtolower($name)] = $value;
        }
        $answer['body'] = (string) \substr($output, $end + 4);
        $length = $answer['headers']['content-length'] ?? null;
        if ($length !== null && (int) $length !== \strlen($answer['body'])) {
            $answer['error'] = \sprintf('%s: Content-Length %d, %d bytes of body', $request['what'], (int) $length, \strlen($answer['body']));
        } elseif ($answer['status'] !== 200 || $answer['body'] === '') {
            $answer['error'] = \sprintf(
                '%s: status %d, %s',
                $request['what'],
                $answer['status'],
                $answer['body'] === '' ? 'empty body' : 'body: ' . \substr($answer['body'], 0, 2000)
            );
        }

        return $answer;
    }
}
