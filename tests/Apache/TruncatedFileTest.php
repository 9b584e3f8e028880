<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Apache;

use Zeusi\GaneshaShmAdapter\Tests\Support\Unique;

/**
 * The segment file of an Apache truncated under load by the user its children run as
 * (www-data, writing the file through docs/scope.md's group setup). Apache's prefork parent installs a
 * SIGBUS handler of its own after PHP started (for its core dumps), which its children inherit:
 * the extension puts its guard back in front of it at a child's first request. No child is
 * killed by SIGBUS, and every request, during the attack and after it, is answered.
 */
final class TruncatedFileTest extends ApacheTestCase
{
    public function testAnApacheWhoseFileIsTruncatedUnderLoadAnswersEveryRequest(): void
    {
        $path = $this->segmentPathOfWwwData();
        $server = $this->startApache(['ganesha_shm.path' => $path, 'ganesha_shm.mode' => '0660']);
        $key = Unique::name('truncated_');
        $increment = ['op' => 'increment', 'key' => $key];

        $load = $server->load(3, self::native(), $increment, 100_000, 3.0);
        \usleep(1_000_000);
        \exec('runuser -u www-data -- truncate -s 0 ' . \escapeshellarg($path) . ' 2>&1', $output, $exit);
        self::assertSame(0, $exit, \implode("\n", $output));
        $during = self::total($load->finish());
        $after = self::total($server->clients(3, self::native(), $increment, 30));
        $info = $server->json(self::native(), ['op' => 'info'])['info'];

        self::report(\sprintf(
            'segment file truncated by www-data under load: %d requests sent during the attack, %d answered; %d after it, %d answered',
            $during['sent'], $during['ok'], $after['sent'], $after['ok']
        ));
        self::assertSame([0, $during['sent']], [$during['failed'], $during['ok']], 'during the attack: ' . \implode('; ', $during['errors']) . "\n" . $server->errorLog());
        self::assertSame([0, 90], [$after['failed'], $after['ok']], 'after the attack: ' . \implode('; ', $after['errors']));
        self::assertStringNotContainsString('Bus error', $server->errorLog(), 'no child was killed by SIGBUS');
        self::assertStringContainsString('truncated', (string) ($info['segment_lost'] ?? ''), 'the child says what happened');
        self::assertStringContainsString('segment file was truncated', $server->errorLog(), 'the loss is logged');
    }
}
