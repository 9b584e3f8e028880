<?php

/*
 * A process of its own beside tests/Zts/harness.c: increments key $argv[1] $argv[2] times through
 * the adapter's native class, over the segment file both map (ganesha_shm.path).
 */

declare(strict_types=1);

use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\TestAdapter;

require \dirname(__DIR__, 2) . '/Support/Autoload.php';
Autoload::register(false);

$adapter = TestAdapter::forWindow(600, null, null);
for ($i = 0; $i < (int) $argv[2]; ++$i) {
    $adapter->increment($argv[1]);
}
