<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * The requests of a server of the web suites (FpmServer, ApacheServer), whose scripts answer
 * JSON: the answers of the client the server sends them with (get(), getAll(): FastCgiClient,
 * HttpClient, whose answers say an error unless they are a 200 with a body) checked and
 * decoded. A failure says why, with the server's logs (errorLog()).
 */
trait JsonRequests
{
    /**
     * Sends GET $script?$query and waits for the answer.
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return array{status: int, headers: array<string, string>, body: string, error: string}
     *     error '' for a 200 with a body
     */
    abstract private function get(string $script, array $query): array;

    /**
     * Sends every request at once and returns the answers, in order.
     *
     * @param list<array{string, array<string, scalar|list<string>>}> $requests [script, query] pairs
     * @return list<array{status: int, headers: array<string, string>, body: string, error: string}>
     */
    abstract private function getAll(array $requests): array;

    /** The server's logs, for the message of a failure. */
    abstract public function errorLog(): string;

    /**
     * GET $script?$query; returns the body. Fails, with the server's logs, on anything but a
     * 200 with a body.
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     */
    public function request(string $script, array $query = []): string
    {
        $answer = $this->get($script, $query);
        if ($answer['error'] !== '') {
            throw new \RuntimeException($answer['error'] . "\n" . $this->errorLog());
        }

        return $answer['body'];
    }

    /**
     * GET $script?$query and decode the JSON it answered.
     *
     * @param array<string, scalar|list<string>> $query (http_build_query())
     * @return array<string, mixed>
     */
    public function json(string $script, array $query = []): array
    {
        return $this->decode($this->request($script, $query));
    }

    /**
     * Sends every request at once and decodes the JSON answers, in order. Fails if any answer
     * is not a 200 with a body.
     *
     * @param list<array<string, scalar|list<string>>> $queries
     * @return list<array<string, mixed>>
     */
    public function jsonAll(string $script, array $queries): array
    {
        return $this->decodeAll($this->getAll(\array_map(static fn (array $q): array => [$script, $q], $queries)));
    }

    /**
     * @param list<array{status: int, headers: array<string, string>, body: string, error: string}> $answers
     * @return list<array<string, mixed>>
     */
    private function decodeAll(array $answers): array
    {
        $errors = \array_filter(\array_column($answers, 'error'));
        if ($errors !== []) {
            throw new \RuntimeException(\implode("\n", $errors) . "\n" . $this->errorLog());
        }

        return \array_map(fn (array $answer): array => $this->decode($answer['body']), $answers);
    }

    /** @return array<string, mixed> */
    private function decode(string $body): array
    {
        try {
            $decoded = \json_decode($body, true, 512, \JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            throw new \RuntimeException("Not JSON: {$body}\n" . $this->errorLog(), 0, $e);
        }
        if (!\is_array($decoded)) {
            throw new \RuntimeException("Not a JSON object: {$body}");
        }

        return $decoded;
    }
}
