<?php

declare(strict_types=1);

namespace Zeusi\GaneshaShmAdapter\Tests\Observability;

use PHPUnit\Framework\Attributes\RequiresOperatingSystemFamily;
use PHPUnit\Framework\TestCase;
use Zeusi\GaneshaShmAdapter\Tests\Support\Command;
use Zeusi\GaneshaShmAdapter\Tests\Support\TempDir;

/**
 * The phpize route, as docker-php-ext-install and PECL-style source builds run it: in a copy of
 * the package, `phpize && ./configure && make && make install` (config.m4 and Makefile.frag)
 * builds the extension with cargo for the PHP of the php-config configure found, and make install
 * puts it into that PHP's extension directory, here staged below INSTALL_ROOT. And ./configure's
 * refusals when what the build needs is missing.
 *
 * @requires OSFAMILY Linux
 */
#[RequiresOperatingSystemFamily('Linux')]
final class PhpizeTest extends TestCase
{
    private const BUILD_TIMEOUT_S = 600.0;

    private string $scratch = '';

    protected function setUp(): void
    {
        $this->scratch = TempDir::create('ganesha-shm-phpize-');
    }

    protected function tearDown(): void
    {
        if ($this->scratch !== '') {
            TempDir::remove($this->scratch);
        }
    }

    public function testPhpizeConfigureMakeInstallGivesTheExtension(): void
    {
        [$phpize, $phpConfig] = $this->tools();
        if (self::cargo() === null) {
            self::markTestSkipped('cargo is not installed: make builds the extension with it (.ci/install-deps installs Rust)');
        }
        $package = PackageCopy::create($this->scratch . '/package');
        $git = Command::which('git');
        if ($git !== null) {
            // every file the build writes must be ignored by the package's .gitignore
            $this->mustRun([$git, 'init', '-q', '.'], $package);
            $this->mustRun([$git, 'add', '-A'], $package);
        }
        $target = $this->scratch . '/cargo-target';
        PackageCopy::seedCargoTarget($target);
        $env = Command::env(['CARGO_TARGET_DIR' => $target]);

        $this->mustRun([$phpize], $package, $env);
        $configure = $this->mustRun(['./configure', '--with-php-config=' . $phpConfig], $package, $env);
        self::assertMatchesRegularExpression('{^checking for cargo >= 1\.85\.\.\. /\S+/cargo \(1\.\d+\.\d+\)$}m', $configure['stdout']);
        self::assertMatchesRegularExpression('{^checking for libclang\.\.\. /\S*libclang\S*\.so}m', $configure['stdout']);
        self::assertDoesNotMatchRegularExpression('/error/i', $configure['stderr'], 'configure reported an error');

        $make = $this->mustRun(['make'], $package, $env, self::BUILD_TIMEOUT_S);
        self::assertMatchesRegularExpression(
            '{Compiling ganesha-shm v[^ ]+ \(' . \preg_quote($package, '{') . '\)}',
            $make['stderr'],
            'cargo did not compile the extension from the copy'
        );
        self::assertStringContainsString("Built {$target}/release/libganesha_shm.so, copied to {$package}/modules/ganesha_shm.so", $make['stdout'], 'CARGO_TARGET_DIR was not honoured');
        self::assertFileExists($package . '/modules/ganesha_shm.so');
        self::assertDirectoryDoesNotExist($package . '/target', 'cargo built into the package, not CARGO_TARGET_DIR');

        $stage = $this->scratch . '/stage';
        $install = $this->mustRun(['make', 'install', 'INSTALL_ROOT=' . $stage], $package, $env, self::BUILD_TIMEOUT_S);
        $extensionDir = \trim($this->mustRun([$phpConfig, '--extension-dir'])['stdout']);
        $installed = $stage . $extensionDir . '/ganesha_shm.so';
        self::assertStringContainsString("Installing shared extensions:     {$stage}{$extensionDir}/", $install['stdout']);
        self::assertFileExists($installed);
        self::assertSame(['ganesha_shm.so'], \array_values(\array_diff(\scandir($stage . $extensionDir) ?: [], ['.', '..'])), 'make install put more than the extension there');
        self::assertFileEquals($package . '/modules/ganesha_shm.so', $installed);

        $loaded = Command::run([\PHP_BINARY, '-n', '-d', 'extension=' . $installed, '-r', 'echo ganesha_shm_info()["version"], " ", phpversion("ganesha_shm");']);
        $version = PackageCopy::version();
        self::assertSame(['exit' => 0, 'stdout' => "{$version} {$version}", 'stderr' => ''], $loaded);

        if ($git !== null) {
            $untracked = $this->mustRun([$git, 'ls-files', '--others', '--exclude-standard'], $package);
            self::assertSame('', $untracked['stdout'], 'build output that .gitignore does not ignore');
        }
    }

    public function testConfigureExplainsAMissingCargo(): void
    {
        [$phpize, $phpConfig] = $this->tools();
        // PATH without any directory holding cargo, and no rustup install in HOME or CARGO_HOME
        $path = [];
        foreach (\explode(\PATH_SEPARATOR, (string) \getenv('PATH')) as $dir) {
            if ($dir !== '' && !\is_file($dir . '/cargo')) {
                $path[] = $dir;
            }
        }
        foreach (['cc', 'sed', 'make'] as $needed) {
            if (Command::which($needed) === null) {
                self::markTestSkipped("{$needed} is not installed");
            }
            if (!\array_filter($path, static fn (string $dir): bool => \is_executable($dir . '/' . $needed))) {
                self::markTestSkipped("{$needed} is only in a directory that holds cargo too");
            }
        }
        $result = $this->configure($phpize, $phpConfig, [
            'PATH' => \implode(\PATH_SEPARATOR, $path),
            'HOME' => $this->scratch,
            'CARGO_HOME' => $this->scratch . '/no-cargo',
            'CARGO' => null,
        ]);

        self::assertNotSame(0, $result['exit'], $result['stdout']);
        self::assertStringContainsString('checking for cargo >= 1.85... no', $result['stdout']);
        self::assertStringContainsString('configure: error: cargo (Rust) was not found on PATH nor in ~/.cargo/bin: install Rust >= 1.85 with rustup (https://rustup.rs)', $result['stderr']);
        self::assertFileDoesNotExist($this->scratch . '/package/Makefile');
    }

    public function testConfigureRefusesATooOldCargo(): void
    {
        [$phpize, $phpConfig] = $this->tools();
        $cargo = $this->scratch . '/cargo';
        \file_put_contents($cargo, "#!/bin/sh\necho 'cargo 1.65.0'\n");
        \chmod($cargo, 0755);
        $result = $this->configure($phpize, $phpConfig, ['CARGO' => $cargo]);

        self::assertNotSame(0, $result['exit'], $result['stdout']);
        self::assertStringContainsString("checking for cargo >= 1.85... no, {$cargo} is 1.65.0", $result['stdout']);
        self::assertStringContainsString("configure: error: cargo 1.65.0 ({$cargo}) is too old: the extension needs Rust >= 1.85", $result['stderr']);
    }

    public function testConfigureExplainsAMissingLibclang(): void
    {
        [$phpize, $phpConfig] = $this->tools();
        if (self::cargo() === null) {
            self::markTestSkipped('cargo is not installed: configure checks it before libclang');
        }
        $empty = $this->scratch . '/empty';
        \mkdir($empty);
        $result = $this->configure($phpize, $phpConfig, ['LIBCLANG_PATH' => $empty]);

        self::assertNotSame(0, $result['exit'], $result['stdout']);
        self::assertStringContainsString('checking for libclang... no', $result['stdout']);
        self::assertStringContainsString("configure: error: LIBCLANG_PATH={$empty} holds no libclang*.so: install it (apt-get install libclang-dev clang", $result['stderr']);
    }

    /**
     * phpize in a fresh copy of the package, then ./configure with environment changes.
     *
     * @param array<string, string|null> $env
     * @return array{exit: int, stdout: string, stderr: string}
     */
    private function configure(string $phpize, string $phpConfig, array $env): array
    {
        $package = PackageCopy::create($this->scratch . '/package');
        $this->mustRun([$phpize], $package);

        return Command::run(['./configure', '--with-php-config=' . $phpConfig], $package, Command::env($env), 120.0);
    }

    /**
     * The phpize and php-config of the PHP running the tests (Debian: phpize8.2 beside php8.2),
     * else those on PATH; skips the test when there are none.
     *
     * @return array{string, string}
     */
    private function tools(): array
    {
        $suffix = (string) \preg_replace('/^php/', '', \basename(\PHP_BINARY));
        $found = [];
        foreach (['phpize', 'php-config'] as $tool) {
            $beside = \dirname(\PHP_BINARY) . '/' . $tool . $suffix;
            $found[] = \is_file($beside) && \is_executable($beside) ? $beside : Command::which($tool);
        }
        if ($found[0] === null || $found[1] === null) {
            self::markTestSkipped('phpize and php-config are not installed: apt-get install php-dev, as .ci/install-deps does');
        }
        $version = \trim(Command::run([$found[1], '--version'])['stdout']);
        if (!\str_starts_with($version, \PHP_MAJOR_VERSION . '.' . \PHP_MINOR_VERSION . '.')) {
            self::markTestSkipped("{$found[1]} is for PHP {$version}, not this PHP " . \PHP_VERSION);
        }

        return [$found[0], $found[1]];
    }

    private static function cargo(): ?string
    {
        $rustup = (\getenv('HOME') ?: '/nonexistent') . '/.cargo/bin/cargo';

        return Command::which('cargo') ?? (\is_executable($rustup) ? $rustup : null);
    }

    /**
     * Runs a command that must succeed; fails with its output otherwise.
     *
     * @param list<string> $command
     * @param array<string, string>|null $env
     * @return array{exit: int, stdout: string, stderr: string}
     */
    private function mustRun(array $command, ?string $cwd = null, ?array $env = null, float $timeout = 120.0): array
    {
        $result = Command::run($command, $cwd, $env, $timeout);
        self::assertSame(0, $result['exit'], \sprintf(
            "%s failed (exit %d)\nstdout:\n%s\nstderr:\n%s",
            \implode(' ', $command),
            $result['exit'],
            $result['stdout'],
            $result['stderr']
        ));

        return $result;
    }
}
