// DER/BER, X.509 and CMS: see issue "Foundation: DER/BER, X.509, CSRs and CMS signatures".
@_exported import OrchardCrypto
