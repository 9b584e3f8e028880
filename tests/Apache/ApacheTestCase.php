<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use Zeusi\GaneshaShmAdapter\Tests\Support\ServerTestCase;

/**
 * Base of the apache suite: every test starts Apache servers of its own (ApacheServer), so
 * every test has a segment of its own, and they are all stopped in tearDown() (ServerTestCase).
 * Skipped when apache2 or mod_php of this PHP version is not installed (.ci/install-deps
 * installs both).
 *
 * @requires extension posix
 */
#[RequiresPhpExtension('posix')]
abstract class ApacheTestCase extends ServerTestCase
{
    protected static function webSuite(): string
    {
        return 'apache';
    }

    protected static function serverMissing(): ?string
    {
        return ApacheServer::missing();
    }

    /**
     * @param array<string, scalar> $ini
     * @param array<string, scalar> $directives
     */
    protected function startApache(array $ini = [], int $startServers = 4, int $maxRequestWorkers = 8, array $directives = []): ApacheServer
    {
        return $this->stopInTearDown(ApacheServer::start($ini, $startServers, $maxRequestWorkers, $directives));
    }

    protected static function native(): string
    {
        return ApacheServer::script('native');
    }

    protected static function ganesha(): string
    {
        return ApacheServer::script('ganesha');
    }

    /**
     * Sends $parties copies of the request at once through a barrier, so that $parties distinct
     * children serve them at the same time; returns the answers keyed by child pid, and fails
     * unless they came from $parties distinct children.
     *
     * @param array<string, scalar|list<string>> $query
     * @return array<int, array<string, mixed>>
     */
    protected static function everyChild(ApacheServer $server, string $script, array $query, int $parties = 4): array
    {
        return self::byDistinctPid($server->jsonAll($script, \array_fill(0, $parties, $query + $server->barrier($parties))), 'children');
    }
}
