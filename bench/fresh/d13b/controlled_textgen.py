# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
max_features, emb_dim, hid, z_dim, c_dim, maxlen, batch_size, BOS = 30, 16, 24, 8, 2, 7, 4, 1
x_train = torch.randint(2, max_features, (16, maxlen))
y_train = torch.randint(0, c_dim, (16,))
lambda_c, lambda_z = 0.1, 0.1


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(max_features, emb_dim)
        self.rnn = nn.GRU(emb_dim, hid, batch_first=True)
        self.mean, self.log_sigma = nn.Linear(hid, z_dim), nn.Linear(hid, z_dim)

    def forward(self, x, dont_pass_emb=False):
        _, h = self.rnn(x if dont_pass_emb else self.emb(x))
        self.z_mean, self.z_sigma = self.mean(h[0]), self.log_sigma(h[0]).exp()
        return self.z_mean + self.z_sigma * torch.randn_like(self.z_sigma)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(max_features, emb_dim, bias=False)
        self.cell = nn.LSTMCell(emb_dim, z_dim + c_dim)
        self.out = nn.Linear(z_dim + c_dim, max_features)

    def forward(self, one_hot_word, hidden, temp=0.5):
        h, c = self.cell(self.emb(one_hot_word), hidden)
        pre_soft = self.out(h)
        return F.softmax(pre_soft / temp, dim=-1), (h, c), pre_soft  # expect: forward


def latent_loss(mean, sigma):
    return 0.5 * torch.mean(mean ** 2 + sigma ** 2 - torch.log(sigma ** 2) - 1)


def train_vae_with_attr_loss(encoder, decoder, discriminator, opt, epochs=2):
    for epoch_index in range(epochs):
        for batch, index in enumerate(range(0, len(x_train), batch_size)):
            opt.zero_grad()
            input_data, output_data = x_train[index:index + batch_size], y_train[index:index + batch_size]
            z = encoder(input_data)
            var_c = F.one_hot(output_data, c_dim).float()
            cat_hidden = (torch.cat([z, var_c], 1), torch.zeros(len(input_data), z_dim + c_dim))
            batch_init_word = F.one_hot(torch.full((len(input_data),), BOS), max_features).float()
            generated, vae_loss = [], 0
            for i in range(maxlen - 1):
                if 'next_word' in locals():
                    word = next_word
                else:
                    word = batch_init_word
                next_word, cat_hidden, pre_soft = decoder(word, cat_hidden)
                vae_loss = vae_loss + F.cross_entropy(pre_soft, input_data[:, i + 1])
                generated.append(next_word)
            ll = latent_loss(encoder.z_mean, encoder.z_sigma)
            generated_sentence = torch.stack(generated, 1)
            l_attr_c = F.cross_entropy(discriminator(generated_sentence.flatten(1)), output_data)
            encoder(decoder.emb(generated_sentence), dont_pass_emb=True)
            l_attr_z = latent_loss(encoder.z_mean, encoder.z_sigma)
            total_vae_loss = vae_loss + ll + lambda_c * l_attr_c + lambda_z * l_attr_z
            total_vae_loss.backward()  # expect: raises frees
            opt.step()
            print(f"[Attr] epoch {epoch_index} batch {batch} language loss {vae_loss.item() / maxlen:.3f}")


encoder, decoder = Encoder(), Decoder()
discriminator = nn.Sequential(nn.Linear((maxlen - 1) * max_features, 32), nn.ReLU(), nn.Linear(32, c_dim))
opt = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)
train_vae_with_attr_loss(encoder, decoder, discriminator, opt)
