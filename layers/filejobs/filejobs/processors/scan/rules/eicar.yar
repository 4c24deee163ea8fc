/*
 * The EICAR anti-malware test file (https://www.eicar.org/download-anti-malware-testfile/).
 * Harmless by design: every scanner must report it, which is how a deployment proves its
 * scanning path end to end.
 */
rule EICAR_Test_File
{
    meta:
        description = "EICAR anti-malware test file"
        severity = "test"
    strings:
        $eicar = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
    condition:
        $eicar
}
