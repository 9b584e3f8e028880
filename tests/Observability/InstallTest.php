<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Autoload;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * bin/ganesha-shm-install, as an application gets it: `composer require` of this package into a
 * new project, then `vendor/bin/ganesha-shm-install` builds a loadable extension. Packagist is
 * not used: the project takes this package, Ganesha and psr/http-message from local path
 * repositories. And the installer's refusals when what the build needs is missing.
 */
final class InstallTest extends TestCase
{
    private const BUILD_TIMEOUT_S = 600.0;

    private string $scratch = '';

    protected function setUp(): void
    {
        $this->scratch = TempDir::create('ganesha-shm-install-');
    }

    protected function tearDown(): void
    {
        if ($this->scratch !== '') {
            TempDir::remove($this->scratch);
        }
    }

    public function testComposerRequireThenTheInstallerGivesALoadableExtension(): void
    {
        $missing = Autoload::ganeshaMissing();
        if ($missing !== null) {
            self::markTestSkipped($missing);
        }
        $composer = Command::which('composer');
        if ($composer === null) {
            self::markTestSkipped('composer is not installed (apt-get install composer; .ci/install-deps installs it)');
        }
        if (Command::which('cargo') === null && !\is_executable((\getenv('HOME') ?: '/nonexistent') . '/.cargo/bin/cargo')) {
            self::markTestSkipped('cargo is not installed: the installer builds the extension with it (.ci/install-deps installs Rust)');
        }

        // The package as Composer would download it: this checkout's files, without build output.
        $package = PackageCopy::create($this->scratch . '/package');
        $psr = $this->psrHttpMessagePackage($this->scratch . '/psr-http-message');
        $ganesha = \dirname((string) (new \ReflectionClass(\Ackintosh\Ganesha::class))->getFileName(), 2);

        $project = $this->scratch . '/project';
        \mkdir($project);
        \file_put_contents($project . '/composer.json', \json_encode([
            'name' => 'acme/app',
            'type' => 'project',
            'minimum-stability' => 'dev',
            'prefer-stable' => true,
            'repositories' => [
                ['packagist.org' => false],
                ['type' => 'path', 'url' => $package, 'options' => ['symlink' => false, 'versions' => ['zeusi/ganesha-shm-adapter' => 'dev-main']]],
                ['type' => 'path', 'url' => $ganesha, 'options' => ['symlink' => false, 'versions' => ['ackintosh/ganesha' => '4.0.0']]],
                ['type' => 'path', 'url' => $psr, 'options' => ['symlink' => false]],
            ],
        ], \JSON_PRETTY_PRINT | \JSON_UNESCAPED_SLASHES));

        $composerEnv = Command::env([
            'COMPOSER_HOME' => $this->scratch . '/composer-home',
            'COMPOSER_CACHE_DIR' => $this->scratch . '/composer-cache',
            'COMPOSER_ALLOW_SUPERUSER' => '1',
            'COMPOSER_NO_AUDIT' => '1',
            'COMPOSER' => null,
        ]);
        $require = Command::run(
            [$composer, 'require', '--no-interaction', '--no-progress', '--no-audit', 'zeusi/ganesha-shm-adapter:@dev'],
            $project,
            $composerEnv,
            120.0,
        );
        self::assertSame(0, $require['exit'], "composer require failed:\n{$require['stdout']}\n{$require['stderr']}");
        self::assertFileExists($project . '/vendor/zeusi/ganesha-shm-adapter/Cargo.toml');
        self::assertFileExists($project . '/vendor/ackintosh/ganesha/src/Ganesha.php');
        self::assertFileExists($project . '/vendor/bin/ganesha-shm-install');
        self::assertFileDoesNotExist($project . '/vendor/zeusi/ganesha-shm-adapter/target', 'the package copy holds build output');

        // The installer, through Composer's proxy in vendor/bin, building into CARGO_TARGET_DIR.
        $target = $this->scratch . '/cargo-target';
        PackageCopy::seedCargoTarget($target);
        $install = Command::run(
            [\PHP_BINARY, 'vendor/bin/ganesha-shm-install'],
            $project,
            Command::env(['CARGO_TARGET_DIR' => $target]),
            self::BUILD_TIMEOUT_S,
        );
        $output = "stdout:\n{$install['stdout']}\nstderr:\n{$install['stderr']}";
        self::assertSame(0, $install['exit'], "vendor/bin/ganesha-shm-install failed:\n{$output}");
        self::assertMatchesRegularExpression(
            '{Compiling ganesha-shm v[^ ]+ \(' . \preg_quote($project . '/vendor/zeusi/ganesha-shm-adapter', '{') . '\)}',
            $install['stderr'],
            'cargo did not compile the extension from the installed package'
        );
        self::assertSame(1, \preg_match('{^extension=(/\S+)$}m', $install['stdout'], $m), "no extension= line:\n{$output}");
        $extension = $m[1];
        self::assertFileExists($extension);
        self::assertStringStartsWith($target . '/', $extension, 'CARGO_TARGET_DIR was not honoured');
        self::assertStringContainsString('php.ini', $install['stdout']);
        self::assertStringContainsString('extension directory', $install['stdout']);

        $loaded = Command::run([\PHP_BINARY, '-n', '-d', 'extension=' . $extension, '-r', 'echo ganesha_shm_info()["layout_version"];']);
        // the same build as the extension under test: the same layout
        self::assertSame(['exit' => 0, 'stdout' => (string) \ganesha_shm_info()['layout_version'], 'stderr' => ''], $loaded);

        // And the application's own autoloader gives the adapter to Ganesha.
        $app = Command::run([\PHP_BINARY, '-n', '-d', 'extension=' . $extension, '-r', <<<'PHP'
            require 'vendor/autoload.php';
            $adapter = new Zeusi\GaneshaShmAdapter\SlidingTimeWindowShm();
            $ganesha = Ackintosh\Ganesha\Builder::withRateStrategy()->adapter($adapter)->timeWindow(30)
                ->failureRateThreshold(50)->minimumRequests(2)->intervalToHalfOpen(60)->build();
            $ganesha->failure('api');
            $ganesha->failure('api');
            echo $adapter->snapshot()['api']['state'], ' ', var_export($ganesha->isAvailable('api'), true);
            PHP], $project);
        self::assertSame(['exit' => 0, 'stdout' => 'open false', 'stderr' => ''], $app);
    }

    public function testTheInstallerExplainsAMissingCargo(): void
    {
        // PATH without cargo, and no rustup install in HOME or CARGO_HOME; cc still found.
        $bin = $this->binDir(['cc']);
        $result = $this->install(['PATH' => $bin, 'HOME' => $this->scratch, 'CARGO_HOME' => $this->scratch . '/no-cargo']);

        self::assertSame(1, $result['exit'], $result['stderr']);
        self::assertStringContainsString('cargo (Rust) was not found on PATH', $result['stderr']);
        self::assertStringContainsString('Install Rust >= 1.85.0 with rustup', $result['stderr']);
        self::assertStringContainsString('https://sh.rustup.rs', $result['stderr']);
        self::assertStringNotContainsString('extension=', $result['stdout']);
        if (\is_link($bin . '/cc')) {
            self::assertStringNotContainsString('No C compiler', $result['stderr'], 'only cargo is missing');
        }
    }

    public function testTheInstallerRefusesATooOldCargo(): void
    {
        $bin = $this->binDir(['cc']);
        \file_put_contents($bin . '/cargo', "#!/bin/sh\necho 'cargo 1.65.0'\n");
        \chmod($bin . '/cargo', 0755);
        $result = $this->install(['PATH' => $bin . ':/usr/bin:/bin']);

        self::assertSame(1, $result['exit'], $result['stderr']);
        self::assertStringContainsString("cargo 1.65.0 ({$bin}/cargo) is too old: the extension needs Rust >= 1.85.0", $result['stderr']);
    }

    public function testTheInstallerNamesEveryMissingPrerequisite(): void
    {
        // A php-config of another PHP, a LIBCLANG_PATH without libclang, no cargo, no cc.
        $bin = $this->binDir([]);
        \file_put_contents($bin . '/php-config', "#!/bin/sh\necho 7.4.33\n");
        \chmod($bin . '/php-config', 0755);
        \mkdir($this->scratch . '/empty');
        $result = $this->install([
            'PATH' => $bin,
            'HOME' => $this->scratch,
            'CARGO_HOME' => $this->scratch . '/no-cargo',
            'PHP_CONFIG' => $bin . '/php-config',
            'LIBCLANG_PATH' => $this->scratch . '/empty',
            'CC' => null,
        ]);

        self::assertSame(1, $result['exit'], $result['stderr']);
        self::assertStringContainsString('cargo (Rust) was not found on PATH', $result['stderr']);
        self::assertStringContainsString("No php-config for this PHP (" . \PHP_VERSION . ', ' . \PHP_BINARY . "): {$bin}/php-config is for PHP 7.4.33", $result['stderr']);
        self::assertStringContainsString('apt-get install php-dev', $result['stderr']);
        if (\PHP_OS_FAMILY === 'Linux') {
            self::assertStringContainsString("LIBCLANG_PATH={$this->scratch}/empty holds no libclang", $result['stderr']);
            self::assertStringContainsString('apt-get install libclang-dev clang', $result['stderr']);
        }
        self::assertStringContainsString('No C compiler and linker (cc) on PATH', $result['stderr']);
        self::assertSame('', $result['stdout']);
    }

    public function testTheInstallerHelp(): void
    {
        $help = $this->install([], ['--help']);
        self::assertSame(0, $help['exit']);
        self::assertStringStartsWith('Usage: ganesha-shm-install', $help['stdout']);
        self::assertStringContainsString('CARGO_TARGET_DIR', $help['stdout']);

        $wrong = $this->install([], ['--frobnicate']);
        self::assertSame(2, $wrong['exit']);
        self::assertStringContainsString('unknown argument --frobnicate', $wrong['stderr']);
    }

    /**
     * Runs this checkout's bin/ganesha-shm-install with environment changes.
     *
     * @param array<string, string|null> $env
     * @param list<string> $args
     * @return array{exit: int, stdout: string, stderr: string}
     */
    private function install(array $env, array $args = []): array
    {
        return Command::run([\PHP_BINARY, \dirname(__DIR__, 2) . '/bin/ganesha-shm-install', ...$args], $this->scratch, Command::env($env), 60.0);
    }

    /**
     * A directory for PATH holding links to the named commands only (those found).
     *
     * @param list<string> $commands
     */
    private function binDir(array $commands): string
    {
        $bin = $this->scratch . '/bin';
        \mkdir($bin);
        foreach ($commands as $command) {
            $path = Command::which($command);
            if ($path !== null) {
                \symlink($path, $bin . '/' . $command);
            }
        }

        return $bin;
    }

    /**
     * A path repository for psr/http-message, Ganesha's one dependency, from the copy this
     * process loads (Debian's php-psr-http-message, or vendor/).
     */
    private function psrHttpMessagePackage(string $dir): string
    {
        $interface = new \ReflectionClass(\Psr\Http\Message\MessageInterface::class);
        $version = $interface->getMethod('getProtocolVersion')->hasReturnType() ? '2.0.0' : '1.0.1';
        \mkdir($dir . '/src', 0777, true);
        foreach (\glob(\dirname((string) $interface->getFileName()) . '/*Interface.php') ?: [] as $file) {
            \copy($file, $dir . '/src/' . \basename($file));
        }
        \file_put_contents($dir . '/composer.json', \json_encode([
            'name' => 'psr/http-message',
            'version' => $version,
            'type' => 'library',
            'license' => 'MIT',
            'require' => ['php' => '>=7.2'],
            'autoload' => ['psr-4' => ['Psr\\Http\\Message\\' => 'src/']],
        ], \JSON_PRETTY_PRINT | \JSON_UNESCAPED_SLASHES));

        return $dir;
    }
}
