<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

/**
 * Requests to php-fpm through a real FastCGI client, `cgi-fcgi -bind -connect` (Debian's
 * libfcgi-bin): one process per request, given the CGI variables in its environment, which it
 * sends as the request's parameters. Nothing of this process's environment is passed on.
 *
 * No dependency on other classes: tests/Fpm/client.php, the load clients, requires this file
 * and tests/Support/LoadClient.php alone.
 */
final class FastCgiClient
{
    public const CGI_FCGI = '/usr/bin/cgi-fcgi';

    /** Seconds a request may take before its client is killed and the request reported failed. */
    public const TIMEOUT_S = 30.0;

    /**
     * Sends GET $script?$query to 127.0.0.1:$port and waits for the answer.
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return array{status: int, headers: array<string, string>, body: string, error: string}
     *     status 0 when the answer was not a CGI response (no answer, connection refused, timeout)
     */
    public static function get(int $port, string $script, array $query = []): array
    {
        return self::finish(self::begin($port, $script, $query));
    }

    /**
     * Sends every request at once, one client process each, and returns the answers in order.
     *
     * @param list<array{string, array<string, scalar|list<string>>}> $requests [script, query] pairs
     * @return list<array{status: int, headers: array<string, string>, body: string, error: string}>
     */
    public static function getAll(int $port, array $requests): array
    {
        $pending = [];
        foreach ($requests as $i => [$script, $query]) {
            $pending[$i] = self::begin($port, $script, $query);
        }
        $answers = [];
        $deadline = \microtime(true) + self::TIMEOUT_S;
        while ($pending !== []) {
            $read = [];
            foreach ($pending as $i => $request) {
                $read[$i] = $request['stdout'];
            }
            $write = $except = null;
            $left = $deadline - \microtime(true);
            if ($left <= 0 || @\stream_select($read, $write, $except, 0, (int) ($left * 1e6)) === false) {
                foreach ($pending as $i => $request) {
                    $answers[$i] = self::finish($request, true);
                }
                break;
            }
            // stream_select() keeps the keys of the streams that are ready
            foreach ($read as $i => $stream) {
                $chunk = \fread($stream, 65536);
                if ($chunk !== false && $chunk !== '') {
                    $pending[$i]['buffer'] .= $chunk;
                } elseif (\feof($stream)) {
                    $answers[$i] = self::finish($pending[$i]);
                    unset($pending[$i]);
                }
            }
        }
        \ksort($answers);

        return \array_values($answers);
    }

    /**
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return array{process: resource, stdout: resource, stderr: resource, buffer: string, what: string}
     */
    private static function begin(int $port, string $script, array $query): array
    {
        $queryString = \http_build_query($query);
        $env = [
            'GATEWAY_INTERFACE' => 'CGI/1.1',
            'SERVER_PROTOCOL' => 'HTTP/1.1',
            'REQUEST_METHOD' => 'GET',
            'SCRIPT_FILENAME' => $script,
            'SCRIPT_NAME' => '/' . \basename($script),
            'REQUEST_URI' => '/' . \basename($script) . ($queryString === '' ? '' : '?' . $queryString),
            'QUERY_STRING' => $queryString,
            'SERVER_NAME' => '127.0.0.1',
            'SERVER_PORT' => (string) $port,
            'REMOTE_ADDR' => '127.0.0.1',
        ];
        $stderr = \tmpfile();
        $process = \proc_open(
            [self::CGI_FCGI, '-bind', '-connect', '127.0.0.1:' . $port],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => $stderr],
            $pipes,
            null,
            $env
        );
        if (!\is_resource($process)) {
            throw new \RuntimeException('Could not start ' . self::CGI_FCGI);
        }

        return [
            'process' => $process,
            'stdout' => $pipes[1],
            'stderr' => $stderr,
            'buffer' => '',
            'what' => 'GET ' . \basename($script) . ($queryString === '' ? '' : '?' . $queryString),
        ];
    }

    /**
     * Reads the rest of the answer (bounded by TIMEOUT_S), reaps the client and parses what it
     * printed: CGI headers, a blank line, the body.
     *
     * @param array{process: resource, stdout: resource, stderr: resource, buffer: string, what: string} $request
     * @return array{status: int, headers: array<string, string>, body: string, error: string}
     */
    private static function finish(array $request, bool $timedOut = false): array
    {
        $deadline = \microtime(true) + self::TIMEOUT_S;
        while (!$timedOut && !\feof($request['stdout'])) {
            $read = [$request['stdout']];
            $write = $except = null;
            $left = $deadline - \microtime(true);
            if ($left <= 0 || @\stream_select($read, $write, $except, 0, (int) ($left * 1e6)) === false) {
                $timedOut = true;
                break;
            }
            $chunk = \fread($request['stdout'], 65536);
            if ($chunk !== false) {
                $request['buffer'] .= $chunk;
            }
        }
        if ($timedOut) {
            \proc_terminate($request['process'], 9);
        }
        \fclose($request['stdout']);
        $exit = \proc_close($request['process']);
        \rewind($request['stderr']);
        $stderr = (string) \stream_get_contents($request['stderr']);
        \fclose($request['stderr']);

        $answer = ['status' => 0, 'headers' => [], 'body' => '', 'error' => ''];
        $output = $request['buffer'];
        $end = \strpos($output, "\r\n\r\n");
        if ($timedOut || $end === false) {
            $answer['error'] = \sprintf(
                '%s: %s (cgi-fcgi exit %d, %d bytes of output) %s',
                $request['what'],
                $timedOut ? \sprintf('no answer within %.0f s', self::TIMEOUT_S) : 'not a CGI response',
                $exit,
                \strlen($output),
                \trim($stderr . ' ' . \substr($output, 0, 500))
            );

            return $answer;
        }
        $answer['status'] = 200;
        foreach (\explode("\r\n", \substr($output, 0, $end)) as $line) {
            [$name, $value] = \array_map('trim', \explode(':', $line, 2)) + [1 => ''];
            $answer['headers'][\strtolower($name)] = $value;
        }
        if (isset($answer['headers']['status'])) {
            $answer['status'] = (int) $answer['headers']['status'];
        }
        $answer['body'] = (string) \substr($output, $end + 4);
        if ($answer['status'] !== 200 || $answer['body'] === '') {
            $answer['error'] = \sprintf(
                '%s: status %d, %s %s',
                $request['what'],
                $answer['status'],
                $answer['body'] === '' ? 'empty body' : 'body: ' . \substr($answer['body'], 0, 2000),
                \trim($stderr)
            );
        }

        return $answer;
    }
}
