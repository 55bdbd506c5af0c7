// Contactless EMV: see issue "EMV contactless core".
import OrchardCrypto
