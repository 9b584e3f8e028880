<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Middleware;

/**
 * Ganesha's GaneshaHttpClient (Symfony HttpClient) over SlidingTimeWindowShm, with Ganesha's
 * RestFailureDetector (5xx are failures; the default, TransportFailureDetector, counts only
 * transport errors): its circuit, named by the default extractor, is the pool's
 * (MiddlewareTestCase).
 */
final class GaneshaHttpClientTest extends MiddlewareTestCase
{
    protected static function client(): string
    {
        return HttpClients::SYMFONY;
    }

    public function testTheCircuitGuardsTheUpstreamForEveryWorker(): void
    {
        $this->assertTheCircuitGuardsTheUpstream();
    }
}
