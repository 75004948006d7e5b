# expect-cause: none
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class KeywordSpotter(nn.Module):
    def __init__(self, n_mels=20, n_keywords=5, n_speakers=4):
        super().__init__()
        self.frontend = nn.Sequential(nn.Conv1d(n_mels, 32, 5, padding=2), nn.ReLU(),
                                      nn.Conv1d(32, 32, 5, padding=2), nn.ReLU())
        self.keyword_head = nn.Linear(32, n_keywords)
        self.speaker_head = nn.Linear(32, n_speakers)

    def forward(self, mels):
        h = self.frontend(mels).mean(-1)
        return self.keyword_head(h), self.speaker_head(h)


class Trainer:
    def __init__(self, model, speaker_weight=0.3):
        self.model = model
        self.speaker_weight = speaker_weight
        self.opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def training_step(self, batch):
        mels, keywords, speakers = batch
        self.opt.zero_grad()
        kw_logits, spk_logits = self.model(mels)
        kw_loss = F.cross_entropy(kw_logits, keywords)
        spk_loss = self.speaker_weight * F.cross_entropy(spk_logits, speakers)
        kw_loss.backward(retain_graph=True)
        spk_loss.backward()
        self.opt.step()
        return kw_loss.item(), spk_loss.item()


trainer = Trainer(KeywordSpotter())
for epoch in range(2):
    for step in range(5):
        batch = (torch.randn(16, 20, 50), torch.randint(0, 5, (16,)), torch.randint(0, 4, (16,)))
        kw, spk = trainer.training_step(batch)
    print(f"epoch {epoch} keyword {kw:.3f} speaker {spk:.3f}")
