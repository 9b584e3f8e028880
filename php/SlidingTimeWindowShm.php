<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter;

use Ackintosh\Ganesha\Storage\Adapter\SlidingTimeWindowInterface;
use Ackintosh\Ganesha\Storage\AdapterInterface;

if (!\extension_loaded('ganesha_shm')) {
    throw new \LogicException(
        'Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm needs the ganesha_shm extension, which is not loaded: '
        . 'build it with `vendor/bin/ganesha-shm-install`, which prints the `extension=` line to add '
        . 'to the php.ini of this SAPI (`php --ini` lists the files read).'
    );
}

/**
 * Ganesha storage adapter for the Rate strategy with a sliding time window, kept in shared memory.
 *
 * The store is created by the ganesha_shm extension when PHP starts: in php-fpm by the master,
 * before it forks its workers, so every worker of one master shares the same circuits.
 *
 * Events are counted in fixed-duration buckets: `load()` sums the buckets spanning the time
 * window, the current one included, and `increment()` adds one to the current bucket with a
 * single atomic operation. The last failure time is kept as long as the buckets, the status
 * for one day; a missing status reads as calmed down. The bucket duration defaults to
 * ceil(timeWindow / 60) seconds and may split the time window into at most ganesha_shm.max_buckets
 * buckets (120 by default).
 *
 * Every method is implemented natively by {@see AbstractSlidingTimeWindowShm}; this class only
 * declares Ganesha's interfaces. Storage failures (store full, key too long) throw Ganesha's
 * StorageException, so that Ganesha fails open and emits its storage_error event.
 */
final class SlidingTimeWindowShm extends AbstractSlidingTimeWindowShm implements AdapterInterface, SlidingTimeWindowInterface
{
}
