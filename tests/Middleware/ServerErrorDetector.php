<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Middleware;

use Ackintosh\Ganesha\GuzzleMiddleware\FailureDetectorInterface;
use Psr\Http\Message\ResponseInterface;

/**
 * The failure detector Ganesha's README gives its GuzzleMiddleware ("How does Guzzle Middleware
 * determine the failure?"), for every 5xx: the middleware's own default,
 * AlwaysSuccessFailureDetector, counts a fulfilled response as a success, and with the stack of
 * HandlerStack::create() the middleware pushed on it sits inside http_errors, so a 503 reaches
 * it fulfilled. Ganesha ships no status-based detector for Guzzle; an application writes this.
 */
final class ServerErrorDetector implements FailureDetectorInterface
{
    public function isFailureResponse(ResponseInterface $response): bool
    {
        return $response->getStatusCode() >= 500;
    }
}
