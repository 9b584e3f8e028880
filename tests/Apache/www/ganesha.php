<?php

/*
 * The fpm suite's script of the real Ganesha (tests/Fpm/www/ganesha.php), served by mod_php:
 * a circuit built anew by every request over SlidingTimeWindowShm, a fixed time through the
 * tests' VirtualClock when the query has `now`; fails with a 500 when Ganesha is not loadable
 * (the tests that use it are skipped then). Apache passes its environment to PHP's getenv(),
 * so GANESHA_DIR reaches tests/autoload.php.
 */

declare(strict_types=1);

require dirname(__DIR__, 2) . '/Fpm/www/ganesha.php';
