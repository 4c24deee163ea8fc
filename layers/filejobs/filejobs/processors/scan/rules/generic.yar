/*
 * Generic rules with a low false-positive rate: patterns legitimate uploads almost never
 * contain, seen in droppers and web shells. They complement signature engines; they do not
 * replace them.
 */

rule Generic_PowerShell_Download_Cradle
{
    meta:
        description = "PowerShell that downloads a script and runs it in memory"
    strings:
        $iex1 = "IEX" nocase ascii wide
        $iex2 = "Invoke-Expression" nocase ascii wide
        $dl1 = "DownloadString(" nocase ascii wide
        $dl2 = "Net.WebClient" nocase ascii wide
    condition:
        filesize < 5MB and 1 of ($iex*) and all of ($dl*)
}

rule Generic_PHP_Webshell_Eval_Request
{
    meta:
        description = "PHP that evaluates code taken straight from the request"
    strings:
        $php = "<?php" nocase
        $eval = /(eval|assert)\s*\(\s*(base64_decode\s*\(\s*)?\$_(POST|GET|REQUEST|COOKIE)\s*\[/ nocase
    condition:
        filesize < 5MB and $php and $eval
}
