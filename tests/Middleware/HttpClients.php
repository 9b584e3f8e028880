<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Middleware;

/**
 * The HTTP clients Ganesha has middlewares for, as the middleware suite finds them: from
 * composer's vendor/ when it holds them, else from Debian's packages, whose autoloaders lie on
 * PHP's default include path (/usr/share/php). Used by the tests (to skip) and by the script the
 * php-fpm workers serve (to load the client); needs no other class.
 */
final class HttpClients
{
    public const GUZZLE = 'guzzle';

    public const SYMFONY = 'symfony';

    /** @var array<string, array{name: string, class: string, autoload: string, package: string}> */
    private const LIBRARIES = [
        self::GUZZLE => [
            'name' => 'Guzzle',
            'class' => 'GuzzleHttp\\Client',
            'autoload' => 'GuzzleHttp/autoload.php',
            'package' => 'php-guzzlehttp-guzzle',
        ],
        self::SYMFONY => [
            'name' => 'Symfony HttpClient',
            'class' => 'Symfony\\Component\\HttpClient\\HttpClient',
            'autoload' => 'Symfony/Component/HttpClient/autoload.php',
            'package' => 'php-symfony-http-client',
        ],
    ];

    /** Why $client cannot be loaded here, or null when it can; loads nothing but vendor/'s classes. */
    public static function missing(string $client): ?string
    {
        $library = self::LIBRARIES[$client] ?? throw new \InvalidArgumentException("unknown client {$client}");
        if (\class_exists($library['class']) || \stream_resolve_include_path($library['autoload']) !== false) {
            return null;
        }

        return \sprintf(
            '%s is not installed (no %s in the include path %s): apt-get install %s, as .ci/install-deps does',
            $library['name'],
            $library['autoload'],
            \get_include_path(),
            $library['package']
        );
    }

    /** Makes $client's classes loadable: vendor/'s, else Debian's autoloader. */
    public static function load(string $client): void
    {
        $missing = self::missing($client);
        if ($missing !== null) {
            throw new \RuntimeException($missing);
        }
        if (!\class_exists(self::LIBRARIES[$client]['class'])) {
            require_once self::LIBRARIES[$client]['autoload'];
        }
    }
}
