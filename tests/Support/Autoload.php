<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Support;

/**
 * Class loading for the test suites and for the child PHP processes some tests start.
 *
 * With Ganesha: tests/autoload.php, shared with the demo (this package's classes, and Ganesha
 * from vendor/ after `composer install`, else from the directory named by GANESHA_DIR).
 * Without: this package's classes only (php/ and tests/), so that the extension finds no
 * Ganesha StorageException to throw, as in an application without Ganesha.
 *
 * Loaded with require by tests/bootstrap.php and by child scripts, before any autoloader.
 */
final class Autoload
{
    public const ENABLE_HINT = 'run `composer install`, or set GANESHA_DIR=<directory of an exported ackintosh/ganesha 4.0.0>';

    private static bool $registered = false;

    /** @var string|null why Ganesha is not loadable; null when it is */
    private static ?string $ganeshaMissing = null;

    /**
     * @param bool $ganesha false: do not look for Ganesha (child processes of the native suite)
     * @return string|null null when Ganesha is loadable, else why it is not
     */
    public static function register(bool $ganesha = true): ?string
    {
        if (self::$registered) {
            return self::$ganeshaMissing;
        }
        self::$registered = true;

        if (!$ganesha) {
            $root = \dirname(__DIR__, 2);
            $prefixes = [
                'Zeusi\\GaneshaShmAdapter\\Tests\\' => $root . '/tests/',
                'Zeusi\\GaneshaShmAdapter\\' => $root . '/php/',
            ];
            \spl_autoload_register(static function (string $class) use ($prefixes): void {
                foreach ($prefixes as $prefix => $dir) {
                    if (\strncmp($class, $prefix, \strlen($prefix)) === 0) {
                        $file = $dir . \str_replace('\\', '/', \substr($class, \strlen($prefix))) . '.php';
                        if (\is_file($file)) {
                            require $file;
                        }

                        return;
                    }
                }
            });

            return self::$ganeshaMissing = 'Ganesha was not looked for';
        }

        $missing = require \dirname(__DIR__) . '/autoload.php';
        if ($missing === null && !\interface_exists('Ackintosh\\Ganesha\\Storage\\AdapterInterface')) {
            $missing = 'Ganesha is not loadable';
        }
        if (\is_string($missing) && !\str_contains($missing, 'composer install')) {
            $missing .= ': ' . self::ENABLE_HINT;
        }

        return self::$ganeshaMissing = $missing;
    }

    public static function ganeshaMissing(): ?string
    {
        return self::register();
    }
}
