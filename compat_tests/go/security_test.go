//go:build security

// franz-go and sarama over TLS and SASL, driven by compat_tests/test_security_clients.py
// (built only with -tags security, run as `go test -tags security -run '^TestSecurity'`):
//
//	WEIR_SECURITY_PROTOCOL       SSL, SASL_SSL or SASL_PLAINTEXT
//	WEIR_SECURITY_SASL_MECHANISM PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER
//	WEIR_SECURITY_USERNAME / WEIR_SECURITY_PASSWORD, or WEIR_SECURITY_TOKEN_FILE (a JWT)
//	WEIR_SECURITY_CA_FILE        the CA the client trusts (PEM)
//	WEIR_SECURITY_CERT_FILE / WEIR_SECURITY_KEY_FILE  the client certificate (mutual TLS)
//	WEIR_SECURITY_TOPIC          a topic the user may write and read (the wrapper creates it)
//	WEIR_SECURITY_EXPECT         round-trip, authentication-error or tls-error
//
// compat_tests/security_harness.py go_env builds the first seven.
package compat

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const securityRecords = 10

type securitySettings struct {
	protocol, mechanism, username, password, tokenFile string
	caFile, certFile, keyFile, topic, expect           string
}

func readSecuritySettings(t *testing.T) securitySettings {
	t.Helper()
	s := securitySettings{
		protocol:  os.Getenv("WEIR_SECURITY_PROTOCOL"),
		mechanism: os.Getenv("WEIR_SECURITY_SASL_MECHANISM"),
		username:  os.Getenv("WEIR_SECURITY_USERNAME"),
		password:  os.Getenv("WEIR_SECURITY_PASSWORD"),
		tokenFile: os.Getenv("WEIR_SECURITY_TOKEN_FILE"),
		caFile:    os.Getenv("WEIR_SECURITY_CA_FILE"),
		certFile:  os.Getenv("WEIR_SECURITY_CERT_FILE"),
		keyFile:   os.Getenv("WEIR_SECURITY_KEY_FILE"),
		topic:     os.Getenv("WEIR_SECURITY_TOPIC"),
		expect:    os.Getenv("WEIR_SECURITY_EXPECT"),
	}
	if s.protocol == "" || s.expect == "" || s.topic == "" {
		t.Fatal("WEIR_SECURITY_PROTOCOL, WEIR_SECURITY_EXPECT and WEIR_SECURITY_TOPIC are required")
	}
	return s
}

func (s securitySettings) tlsConfig(t *testing.T) *tls.Config {
	t.Helper()
	if s.protocol != "SSL" && s.protocol != "SASL_SSL" {
		return nil
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			t.Fatal(err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			t.Fatalf("no certificate in %s", s.caFile)
		}
	}
	if s.certFile != "" {
		pair, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			t.Fatal(err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config
}

func (s securitySettings) token(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(s.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func (s securitySettings) kgoMechanism(t *testing.T) sasl.Mechanism {
	t.Helper()
	switch s.mechanism {
	case "PLAIN":
		return plain.Auth{User: s.username, Pass: s.password}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.username, Pass: s.password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.username, Pass: s.password}.AsSha512Mechanism()
	case "OAUTHBEARER":
		return oauth.Auth{Token: s.token(t)}.AsMechanism()
	}
	t.Fatalf("unknown SASL mechanism %q", s.mechanism)
	return nil
}

func (s securitySettings) kgoOptions(t *testing.T) []kgo.Opt {
	t.Helper()
	opts := []kgo.Opt{kgo.DialTimeout(5 * time.Second), kgo.RequestRetries(2)}
	if config := s.tlsConfig(t); config != nil {
		opts = append(opts, kgo.DialTLSConfig(config))
	}
	if s.mechanism != "" {
		opts = append(opts, kgo.SASL(s.kgoMechanism(t)))
	}
	return opts
}

// expectedValues are what each round trip writes and must read back.
func expectedValues() []string {
	values := make([]string, securityRecords)
	for i := range values {
		values[i] = fmt.Sprintf("secured-%d", i)
	}
	return values
}

// checkLoginFailure asserts err is the failure WEIR_SECURITY_EXPECT names.
func checkLoginFailure(t *testing.T, expect string, err error, authFailed error) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected %s, the client connected", expect)
	}
	var verification *tls.CertificateVerificationError
	switch expect {
	case "authentication-error":
		if !errors.Is(err, authFailed) {
			t.Fatalf("expected %v, got %v", authFailed, err)
		}
	case "tls-error":
		if !errors.As(err, &verification) && !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("expected a certificate verification error, got %v", err)
		}
	default:
		t.Fatalf("unknown WEIR_SECURITY_EXPECT %q", expect)
	}
	t.Logf("failed as expected: %v", err)
}

func TestSecurityFranzGo(t *testing.T) {
	s := readSecuritySettings(t)
	ctx := testContext(t, 30*time.Second)
	if s.expect != "round-trip" {
		client := newKgoClient(t, s.kgoOptions(t)...)
		checkLoginFailure(t, s.expect, client.Ping(ctx), kerr.SaslAuthenticationFailed)
		return
	}
	producer := newKgoClient(t, s.kgoOptions(t)...)
	var records []*kgo.Record
	for _, value := range expectedValues() {
		records = append(records, &kgo.Record{Topic: s.topic, Value: []byte(value)})
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	consumer := newKgoClient(t, append(s.kgoOptions(t),
		kgo.ConsumeTopics(s.topic),
		kgo.ConsumerGroup(s.topic+"-franz"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)...)
	var read []string
	for len(read) < securityRecords {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(read), securityRecords)
		}
		for _, fetchErr := range fetches.Errors() {
			// a group's first join may meet a coordinator still loading: kgo retries
			if !kerr.IsRetriable(fetchErr.Err) {
				t.Fatalf("fetch: %v", fetchErr.Err)
			}
		}
		for _, record := range fetches.Records() {
			read = append(read, string(record.Value))
		}
	}
	assertSameValues(t, read)
}

func assertSameValues(t *testing.T, read []string) {
	t.Helper()
	want := expectedValues()
	sort.Strings(read)
	sort.Strings(want)
	if strings.Join(read, ",") != strings.Join(want, ",") {
		t.Fatalf("read %v, want %v", read, want)
	}
}

func (s securitySettings) saramaConfig(t *testing.T) *sarama.Config {
	t.Helper()
	config := saramaConfig(sarama.V3_9_0_0)
	config.Net.DialTimeout = 5 * time.Second
	config.Metadata.Retry.Max = 1
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	if tlsConfig := s.tlsConfig(t); tlsConfig != nil {
		config.Net.TLS.Enable = true
		config.Net.TLS.Config = tlsConfig
	}
	if s.mechanism == "" {
		return config
	}
	config.Net.SASL.Enable = true
	config.Net.SASL.Handshake = true
	// SaslHandshake v1 + SaslAuthenticate: Kafka 4 no longer serves v0's raw exchange
	config.Net.SASL.Version = sarama.SASLHandshakeV1
	config.Net.SASL.Mechanism = sarama.SASLMechanism(s.mechanism)
	config.Net.SASL.User = s.username
	config.Net.SASL.Password = s.password
	switch s.mechanism {
	case "SCRAM-SHA-256":
		config.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{newHash: sha256.New} }
	case "SCRAM-SHA-512":
		config.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{newHash: sha512.New} }
	case "OAUTHBEARER":
		config.Net.SASL.TokenProvider = fileTokenProvider{s.token(t)}
	}
	return config
}

type fileTokenProvider struct{ token string }

func (p fileTokenProvider) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: p.token}, nil
}

func TestSecuritySarama(t *testing.T) {
	s := readSecuritySettings(t)
	config := s.saramaConfig(t)
	client, err := sarama.NewClient(bootstrap(), config)
	if s.expect != "round-trip" {
		if err == nil {
			client.Close()
		}
		checkLoginFailure(t, s.expect, err, sarama.ErrSASLAuthenticationFailed)
		return
	}
	if err != nil {
		t.Fatalf("sarama.NewClient: %v", err)
	}
	defer client.Close()
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	var messages []*sarama.ProducerMessage
	for _, value := range expectedValues() {
		messages = append(messages, &sarama.ProducerMessage{Topic: s.topic, Value: sarama.StringEncoder(value)})
	}
	if err := producer.SendMessages(messages); err != nil {
		t.Fatalf("produce: %v", err)
	}
	producer.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	partitions, err := consumer.Partitions(s.topic)
	if err != nil {
		t.Fatal(err)
	}
	values := make(chan string, 2*securityRecords)
	for _, partition := range partitions {
		pc, err := consumer.ConsumePartition(s.topic, partition, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		go func() {
			for message := range pc.Messages() {
				values <- string(message.Value)
			}
		}()
	}
	var read []string
	deadline := time.After(30 * time.Second)
	for len(read) < securityRecords {
		select {
		case value := <-values:
			read = append(read, value)
		case <-deadline:
			t.Fatalf("read %d of %d records", len(read), securityRecords)
		}
	}
	assertSameValues(t, read)
}

// scramClient is RFC 5802's client side for sarama (which leaves SCRAM to the caller):
// client-first, then client-final with the proof, then the server signature checked.
type scramClient struct {
	newHash                 func() hash.Hash
	password, nonce, bare   string
	expectedServerSignature []byte
	step                    int
}

func (c *scramClient) Begin(userName, password, authzID string) error {
	nonce := make([]byte, 24)
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	c.password, c.nonce = password, base64.RawStdEncoding.EncodeToString(nonce)
	name := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(userName)
	c.bare = "n=" + name + ",r=" + c.nonce
	return nil
}

func (c *scramClient) hmac(key []byte, message string) []byte {
	mac := hmac.New(c.newHash, key)
	mac.Write([]byte(message))
	return mac.Sum(nil)
}

func (c *scramClient) Step(challenge string) (string, error) {
	c.step++
	switch c.step {
	case 1:
		return "n,," + c.bare, nil
	case 2:
		fields := map[string]string{}
		for _, field := range strings.Split(challenge, ",") {
			if key, value, ok := strings.Cut(field, "="); ok {
				fields[key] = value
			}
		}
		if !strings.HasPrefix(fields["r"], c.nonce) {
			return "", fmt.Errorf("server nonce %q does not extend ours", fields["r"])
		}
		salt, err := base64.StdEncoding.DecodeString(fields["s"])
		if err != nil {
			return "", err
		}
		iterations, err := strconv.Atoi(fields["i"])
		if err != nil {
			return "", err
		}
		salted, err := pbkdf2.Key(c.newHash, c.password, salt, iterations, c.newHash().Size())
		if err != nil {
			return "", err
		}
		clientKey := c.hmac(salted, "Client Key")
		stored := c.newHash()
		stored.Write(clientKey)
		withoutProof := "c=biws,r=" + fields["r"]
		authMessage := c.bare + "," + challenge + "," + withoutProof
		proof := c.hmac(stored.Sum(nil), authMessage)
		for i := range proof {
			proof[i] ^= clientKey[i]
		}
		c.expectedServerSignature = c.hmac(c.hmac(salted, "Server Key"), authMessage)
		return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
	case 3:
		signature, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(challenge, "v="))
		if err != nil || !hmac.Equal(signature, c.expectedServerSignature) {
			return "", fmt.Errorf("server signature %q does not match", challenge)
		}
		return "", nil
	}
	return "", errors.New("SCRAM exchange already done")
}

func (c *scramClient) Done() bool { return c.step >= 3 }
