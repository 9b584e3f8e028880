<?php

/*
 * The configurations of ConfigurationTest, which scripts/configuration.php gives the adapter
 * and the test names: Ganesha's own Configuration, made without its Builder, with one setting
 * stored in each form below, the others valid.
 *
 * Returns name => [strategy ('rate' or 'count'), setting, the configuration's parameters].
 */

declare(strict_types=1);

$settings = [
    'rate' => ['timeWindow' => 60, 'failureRateThreshold' => 50, 'minimumRequests' => 2, 'intervalToHalfOpen' => 5],
    'count' => ['failureCountThreshold' => 3, 'intervalToHalfOpen' => 5],
];
$forms = static fn (int $value): array => [
    'an int' => $value,
    'a numeric string' => (string) $value,
    'a numeric string with leading whitespace' => " {$value}",
    'an integral float string' => "{$value}.0",
    'a fractional float string' => "{$value}.5",
    'an integral float' => (float) $value,
    'a fractional float' => $value + 0.5,
    'true' => true,
    'a non-numeric string' => 'sixty',
    'a leading-numeric string' => "{$value} seconds",
    'an empty string' => '',
    'an array' => [$value],
    'an object' => new \stdClass(),
    'null' => null,
];

$cases = [];
foreach ($settings as $strategy => $values) {
    foreach ($values as $setting => $value) {
        foreach ($forms($value) as $label => $stored) {
            $cases["{$strategy} {$setting} as {$label}"] = [$strategy, $setting, [$setting => $stored] + $values];
        }
    }
}

return $cases;
