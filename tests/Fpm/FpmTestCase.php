<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use PHPUnit\Framework\Attributes\RequiresPhpExtension;
use Zeusi\GaneshaShmAdapter\Tests\Support\ServerTestCase;

/**
 * Base of the fpm suite: every test starts php-fpm masters of its own (FpmServer), so every
 * test has a segment of its own, and they are all stopped in tearDown() (ServerTestCase).
 * Skipped when php-fpm or cgi-fcgi is not installed (.ci/install-deps installs both).
 *
 * @requires extension posix
 */
#[RequiresPhpExtension('posix')]
abstract class FpmTestCase extends ServerTestCase
{
    protected static function webSuite(): string
    {
        return 'fpm';
    }

    protected static function serverMissing(): ?string
    {
        return FpmServer::missing();
    }

    /**
     * @param array<string, scalar> $ini
     * @param 'static'|'ondemand' $pm
     */
    protected function startFpm(array $ini = [], string $pm = 'static', int $maxChildren = 4, array $pool = []): FpmServer
    {
        return $this->stopInTearDown(FpmServer::start($ini, $pm, $maxChildren, $pool));
    }

    protected static function native(): string
    {
        return FpmServer::script('native');
    }

    protected static function ganesha(): string
    {
        return FpmServer::script('ganesha');
    }

    /**
     * Sends $parties copies of the request at once through a barrier, so that $parties distinct
     * workers serve them at the same time; returns the answers keyed by worker pid, and fails
     * unless they came from $parties distinct workers.
     *
     * @param array<string, scalar|list<string>> $query
     * @return array<int, array<string, mixed>>
     */
    protected static function everyWorker(FpmServer $server, string $script, array $query, int $parties = 4): array
    {
        return self::byDistinctPid($server->jsonAll($script, \array_fill(0, $parties, $query + $server->barrier($parties))), 'workers');
    }
}
