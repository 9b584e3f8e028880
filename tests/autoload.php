<?php

/**
 * Class loading for a checkout of this repository: the package's own classes from php/, and
 * Ganesha from vendor/ when composer installed it, else from the directory named by the
 * environment variable GANESHA_DIR (an exported ackintosh/ganesha, with Debian's
 * php-psr-http-message for its one dependency).
 *
 * Returns null when Ganesha was found, else why it was not.
 */

declare(strict_types=1);

$root = dirname(__DIR__);
$psr4 = ['Zeusi\\GaneshaShmAdapter\\Tests\\' => $root . '/tests/', 'Zeusi\\GaneshaShmAdapter\\' => $root . '/php/'];
$ganeshaMissing = null;

if (is_file($root . '/vendor/autoload.php')) {
    require_once $root . '/vendor/autoload.php';
} elseif (($ganeshaDir = getenv('GANESHA_DIR')) !== false && $ganeshaDir !== '') {
    if (!is_file($ganeshaDir . '/src/Ganesha.php')) {
        $ganeshaMissing = "GANESHA_DIR={$ganeshaDir} does not hold Ganesha (no src/Ganesha.php)";
    } else {
        $psr4['Ackintosh\\'] = rtrim($ganeshaDir, '/') . '/src/';
        // Ganesha's one dependency, psr/http-message, from the include path (Debian's package).
        $psrHttpMessage = stream_resolve_include_path('Psr/Http/Message/autoload.php');
        if ($psrHttpMessage !== false) {
            require_once $psrHttpMessage;
        }
    }
} else {
    $ganeshaMissing = 'Ganesha is not installed: run `composer install`, or set GANESHA_DIR to an exported ackintosh/ganesha (4.0.0)';
}

spl_autoload_register(static function (string $class) use ($psr4): void {
    foreach ($psr4 as $prefix => $directory) {
        if (strncmp($class, $prefix, strlen($prefix)) === 0) {
            $file = $directory . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
            if (is_file($file)) {
                require $file;
            }
            return;
        }
    }
});

return $ganeshaMissing;
