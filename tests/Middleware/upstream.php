<?php

/*
 * The upstream of the middleware suite, the service behind the circuit: the router script of
 * PHP's built-in server (`php -n -S 127.0.0.1:PORT -t DIR upstream.php`, Upstream). It answers
 * every request with the status written in DIR/status (200 while there is none) and appends
 * one line per request to DIR/requests, so that a test counts the requests that reached it.
 */

declare(strict_types=1);

$dir = $_SERVER['DOCUMENT_ROOT'];
file_put_contents($dir . '/requests', $_SERVER['REQUEST_URI'] . "\n", FILE_APPEND | LOCK_EX);
$status = (int) (@file_get_contents($dir . '/status') ?: 200);
http_response_code($status);
header('Content-Type: text/plain');
echo $status, "\n";
