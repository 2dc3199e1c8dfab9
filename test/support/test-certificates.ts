import { webcrypto } from 'node:crypto';
// @peculiar/x509 2 resolves its parsers through tsyringe, which needs the Reflect metadata API
// before x509 is evaluated (this import must stay above it). Test support only: src never loads it.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

/** A PEM certificate and its PKCS #8 private key. */
export interface CertificatePair {
  cert: string;
  key: string;
}

/** A throwaway certificate authority, a server certificate and client certificates it signed. */
export interface TestCertificates {
  ca: CertificatePair;
  server: CertificatePair;
  client(commonName: string): Promise<CertificatePair>;
}

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const day = 24 * 3600 * 1000;

/**
 * Certificates made for one test run, in memory: nothing secret is kept in the repository.
 * The server's certificate names `serverName` (a DNS name), as a real deployment's would.
 */
export async function createTestCertificates(serverName: string): Promise<TestCertificates> {
  const caKeys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=generation-service test CA',
    notBefore: new Date(Date.now() - day),
    notAfter: new Date(Date.now() + day),
    signingAlgorithm: algorithm,
    keys: caKeys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  let serial = 1;
  const issue = async (
    commonName: string,
    usage: string,
    subjectAlternativeName?: string,
  ): Promise<CertificatePair> => {
    const keys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
    serial += 1;
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial.toString(16).padStart(2, '0'),
      subject: `CN=${commonName}`,
      issuer: caCert.subject,
      notBefore: new Date(Date.now() - day),
      notAfter: new Date(Date.now() + day),
      signingAlgorithm: algorithm,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([usage]),
        await x509.AuthorityKeyIdentifierExtension.create(caCert),
        ...(subjectAlternativeName
          ? [new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: subjectAlternativeName }])]
          : []),
      ],
    });
    return { cert: cert.toString('pem'), key: await privateKeyPem(keys.privateKey) };
  };
  return {
    ca: { cert: caCert.toString('pem'), key: await privateKeyPem(caKeys.privateKey) },
    server: await issue(serverName, x509.ExtendedKeyUsage.serverAuth, serverName),
    client: (commonName) => issue(commonName, x509.ExtendedKeyUsage.clientAuth),
  };
}

/**
 * A self-signed certificate for localhost, 127.0.0.1, 127.0.0.2 and ::1 (so it is also the CA to
 * trust), for HTTPS test servers on loopback.
 */
export async function selfSignedLoopbackCertificate(): Promise<CertificatePair> {
  const keys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=localhost',
    notBefore: new Date(Date.now() - day),
    notAfter: new Date(Date.now() + day),
    signingAlgorithm: algorithm,
    keys,
    extensions: [
      new x509.SubjectAlternativeNameExtension([
        { type: 'dns', value: 'localhost' },
        { type: 'ip', value: '127.0.0.1' },
        { type: 'ip', value: '127.0.0.2' },
        { type: 'ip', value: '::1' },
      ]),
    ],
  });
  return { cert: cert.toString('pem'), key: await privateKeyPem(keys.privateKey) };
}

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}
