<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Middleware;

/**
 * Ganesha's GuzzleMiddleware over SlidingTimeWindowShm, as Ganesha's README sets it up (pushed
 * on HandlerStack::create()'s stack), with a failure detector for 5xx (ServerErrorDetector):
 * its circuit, named by the default extractor, is the pool's (MiddlewareTestCase).
 */
final class GuzzleMiddlewareTest extends MiddlewareTestCase
{
    protected static function client(): string
    {
        return HttpClients::GUZZLE;
    }

    public function testTheCircuitGuardsTheUpstreamForEveryWorker(): void
    {
        $this->assertTheCircuitGuardsTheUpstream();
    }
}
