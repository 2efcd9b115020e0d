#!/bin/sh
# The lab's directory, as a site has one: Debian's slapd on ldap1 (lab only;
# the collection configures the clients, role sssd). Run inside the
# container by lab/labctl.py, once, with the users as arguments
# ("name:uid" each; a group of the same name and id per user).
#   - LDAPS and StartTLS with a certificate from a CA made here (the clients
#     get ca.pem and verify the name ldap1);
#   - ou=people and ou=groups under dc=hybridhpc,dc=lab (rfc2307: posixAccount,
#     posixGroup with memberUid);
#   - anonymous clients may bind and nothing else: SSSD binds as
#     cn=sssd,ou=services with the password in /root/lab-ldap/bind.pw (0600),
#     so a wrong bind password fails the lab instead of falling back to an
#     anonymous search.
# Passwords are made here and never pass a command line.
set -eu
BASE=dc=hybridhpc,dc=lab
OUT=/root/lab-ldap
export DEBIAN_FRONTEND=noninteractive

if [ -s "$OUT/done" ]; then
  exit 0
fi
umask 077
mkdir -p "$OUT"
# No newline: slappasswd -T, ldapadd -y and SSSD take the whole file as the password.
openssl_rand() { head -c 24 /dev/urandom | base64 | tr -d '/+=\n'; }
[ -s "$OUT/admin.pw" ] || openssl_rand > "$OUT/admin.pw"
[ -s "$OUT/bind.pw" ] || openssl_rand > "$OUT/bind.pw"

{
  echo "slapd slapd/domain string hybridhpc.lab"
  echo "slapd shared/organization string hybridhpc lab"
  echo "slapd slapd/password1 password $(cat "$OUT/admin.pw")"
  echo "slapd slapd/password2 password $(cat "$OUT/admin.pw")"
  echo "slapd slapd/no_configuration boolean false"
  echo "slapd slapd/purge_database boolean true"
  echo "slapd slapd/move_old_database boolean true"
} | debconf-set-selections
apt-get update -qq
apt-get install -y -qq slapd ldap-utils openssl >/dev/null

# TLS: a CA and ldap1's certificate (its name on both lab networks).
TLS=/etc/ldap/tls
mkdir -p "$TLS"
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=hybridhpc lab CA" \
  -keyout "$TLS/ca.key" -out "$TLS/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=ldap1" -keyout "$TLS/ldap1.key" -out "$TLS/ldap1.csr" 2>/dev/null
printf 'subjectAltName=DNS:ldap1\nextendedKeyUsage=serverAuth\n' > "$TLS/ext.cnf"
openssl x509 -req -in "$TLS/ldap1.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial -days 30 \
  -extfile "$TLS/ext.cnf" -out "$TLS/ldap1.pem" 2>/dev/null
chown -R openldap:openldap "$TLS"
chmod 0644 "$TLS/ca.pem" "$TLS/ldap1.pem"
cp "$TLS/ca.pem" "$OUT/ca.pem"

ldapmodify -Q -Y EXTERNAL -H ldapi:/// >/dev/null <<EOF
dn: cn=config
changetype: modify
replace: olcTLSCACertificateFile
olcTLSCACertificateFile: $TLS/ca.pem
-
replace: olcTLSCertificateFile
olcTLSCertificateFile: $TLS/ldap1.pem
-
replace: olcTLSCertificateKeyFile
olcTLSCertificateKeyFile: $TLS/ldap1.key
EOF

# Reads only for a bound client (SSSD's account); the password attribute for binding only.
ldapmodify -Q -Y EXTERNAL -H ldapi:/// >/dev/null <<EOF
dn: olcDatabase={1}mdb,cn=config
changetype: modify
replace: olcAccess
olcAccess: {0}to attrs=userPassword by self write by anonymous auth by * none
olcAccess: {1}to * by dn.exact="cn=admin,$BASE" write by users read by * none
EOF

sed -i 's|^SLAPD_SERVICES=.*|SLAPD_SERVICES="ldap:/// ldaps:/// ldapi:///"|' /etc/default/slapd
systemctl restart slapd

BIND_HASH=$(slappasswd -T "$OUT/bind.pw")
{
  printf 'dn: ou=people,%s\nobjectClass: organizationalUnit\nou: people\n\n' "$BASE"
  printf 'dn: ou=groups,%s\nobjectClass: organizationalUnit\nou: groups\n\n' "$BASE"
  printf 'dn: ou=services,%s\nobjectClass: organizationalUnit\nou: services\n\n' "$BASE"
  printf 'dn: cn=sssd,ou=services,%s\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\ncn: sssd\nuserPassword: %s\n\n' \
    "$BASE" "$BIND_HASH"
  for user in "$@"; do
    name=${user%%:*}
    id=${user#*:}
    printf 'dn: uid=%s,ou=people,%s\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\n' "$name" "$BASE"
    printf 'uid: %s\ncn: %s\nsn: %s\nuidNumber: %s\ngidNumber: %s\nhomeDirectory: /home/%s\nloginShell: /bin/bash\n\n' \
      "$name" "$name" "$name" "$id" "$id" "$name"
    printf 'dn: cn=%s,ou=groups,%s\nobjectClass: posixGroup\ncn: %s\ngidNumber: %s\nmemberUid: %s\n\n' \
      "$name" "$BASE" "$name" "$id" "$name"
  done
} > "$OUT/entries.ldif"
ldapadd -x -H ldapi:/// -D "cn=admin,$BASE" -y "$OUT/admin.pw" -f "$OUT/entries.ldif" >/dev/null

# What a client sees: LDAPS with the CA, as SSSD's account.
LDAPTLS_CACERT="$TLS/ca.pem" ldapsearch -x -H ldaps://ldap1 -D "cn=sssd,ou=services,$BASE" -y "$OUT/bind.pw" \
  -b "ou=people,$BASE" "(objectClass=posixAccount)" uid | grep -c '^uid:' > "$OUT/done"
