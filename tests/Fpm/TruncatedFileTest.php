<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Fpm;

use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * A php-fpm pool whose segment file is truncated under load by the user its workers run as
 * (www-data, writing the file through docs/scope.md's group setup): no worker is killed by SIGBUS,
 * and every request, during the attack and after it, is answered. Each worker that faults goes
 * on with a segment of its own and logs it once; the master's mapping, which new workers would
 * inherit, is guarded the same way.
 */
final class TruncatedFileTest extends FpmTestCase
{
    public function testAPoolWhoseFileIsTruncatedUnderLoadAnswersEveryRequest(): void
    {
        $path = $this->segmentPathOfWwwData();
        $server = $this->startFpm(['ganesha_shm.path' => $path, 'ganesha_shm.mode' => '0660']);
        $key = Unique::name('truncated_');
        $before = self::total($server->clients(4, self::native(), ['op' => 'increment', 'key' => $key], 25));
        self::assertSame([100, 0], [$before['ok'], $before['failed']]);

        // 1 s into a 3 s load, www-data truncates the file; then once more to one page
        $attack = \sprintf(
            '(sleep 1; runuser -u www-data -- truncate -s 0 %1$s; sleep 0.5; runuser -u www-data -- truncate -s 4096 %1$s) >/dev/null 2>&1 &',
            \escapeshellarg($path)
        );
        \exec($attack);
        $during = self::total($server->clients(4, self::native(), ['op' => 'increment', 'key' => $key], null, 3.0));
        $after = self::total($server->clients(4, self::native(), ['op' => 'increment', 'key' => $key], 25));
        $workers = $server->workerPids();
        $info = $server->json(self::native(), ['op' => 'info'])['info'];

        self::report(\sprintf(
            'segment file truncated by www-data under load: %d requests sent during the attack, %d answered; %d after it, %d answered',
            $during['sent'], $during['ok'], $after['sent'], $after['ok']
        ));
        self::assertSame(0, $during['failed'], 'during the attack: ' . \implode('; ', $during['errors']) . "\n" . $server->fpmLog());
        self::assertSame($during['sent'], $during['ok']);
        self::assertSame([100, 0], [$after['ok'], $after['failed']], 'after the attack: ' . \implode('; ', $after['errors']));
        \clearstatcache();
        self::assertSame(4096, \filesize($path), 'the attack happened');
        self::assertStringNotContainsString('signal 7', $server->fpmLog(), 'no worker was killed by SIGBUS');
        self::assertCount(4, $workers, 'the same pool of workers');
        self::assertStringContainsString('truncated', (string) ($info['segment_lost'] ?? ''), 'the worker says what happened');
        self::assertStringContainsString('segment file was truncated', $server->errorLog() . $server->fpmLog(), 'the loss is logged');
    }
}
