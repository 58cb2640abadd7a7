"""The publications the built-in encodings come from (`core.Paper`), each once.

Each record of the registry names its own in `Encoding.papers`; the leaderboard's page of an
encoding and its BibTeX file are read from there. An author list this file is not sure of to
the last name ends in 'and others' (BibTeX prints "et al.").

Example:
  >>> PRESS2022.cite, PRESS2022.venue
  ('Press et al. 2022', 'ICLR 2022')
"""

from __future__ import annotations

from posenc.encodings.core import Paper


def _arxiv(number: str) -> str:
  return f'https://arxiv.org/abs/{number}'


VASWANI2017 = Paper(
  'vaswani2017attention',
  'Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and '
  'Gomez, Aidan N. and Kaiser, Łukasz and Polosukhin, Illia',
  'Attention Is All You Need',
  2017,
  'NeurIPS 2017',
  _arxiv('1706.03762'),
  (('booktitle', 'Advances in Neural Information Processing Systems 30'),),
)
GEHRING2017 = Paper(
  'gehring2017convolutional',
  'Gehring, Jonas and Auli, Michael and Grangier, David and Yarats, Denis and Dauphin, Yann N.',
  'Convolutional Sequence to Sequence Learning',
  2017,
  'ICML 2017',
  _arxiv('1705.03122'),
  (('booktitle', 'Proceedings of the 34th International Conference on Machine Learning'),),
)
DAI2019 = Paper(
  'dai2019transformerxl',
  'Dai, Zihang and Yang, Zhilin and Yang, Yiming and Carbonell, Jaime and Le, Quoc V. and '
  'Salakhutdinov, Ruslan',
  'Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context',
  2019,
  'ACL 2019',
  _arxiv('1901.02860'),
  (('booktitle', 'Proceedings of the 57th Annual Meeting of the ACL'),),
)
RAFFEL2020 = Paper(
  'raffel2020t5',
  'Raffel, Colin and Shazeer, Noam and Roberts, Adam and Lee, Katherine and Narang, Sharan and '
  'Matena, Michael and Zhou, Yanqi and Li, Wei and Liu, Peter J.',
  'Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer',
  2020,
  'JMLR 21(140)',
  _arxiv('1910.10683'),
  (('journal', 'Journal of Machine Learning Research'), ('volume', '21'), ('number', '140')),
  kind='article',
)
PRESS2022 = Paper(
  'press2022alibi',
  'Press, Ofir and Smith, Noah A. and Lewis, Mike',
  'Train Short, Test Long: Attention with Linear Biases Enables Input Length Extrapolation',
  2022,
  'ICLR 2022',
  _arxiv('2108.12409'),
  (('booktitle', 'International Conference on Learning Representations'),),
)
HAVIV2022 = Paper(
  'haviv2022nopos',
  'Haviv, Adi and Ram, Ori and Press, Ofir and Izsak, Peter and Levy, Omer',
  'Transformer Language Models without Positional Encodings Still Learn Positional Information',
  2022,
  'Findings of EMNLP 2022',
  _arxiv('2203.16634'),
  (('booktitle', 'Findings of the Association for Computational Linguistics: EMNLP 2022'),),
)
CSORDAS2022 = Paper(
  'csordas2022ndr',
  'Csordás, Róbert and Irie, Kazuki and Schmidhuber, Jürgen',
  'The Neural Data Router: Adaptive Control Flow in Transformers Improves Systematic '
  'Generalization',
  2022,
  'ICLR 2022',
  _arxiv('2110.07732'),
  (('booktitle', 'International Conference on Learning Representations'),),
)
CHI2022 = Paper(
  'chi2022kerple',
  'Chi, Ta-Chung and Fan, Ting-Han and Ramadge, Peter J. and Rudnicky, Alexander I.',
  'KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation',
  2022,
  'NeurIPS 2022',
  _arxiv('2205.09921'),
  (('booktitle', 'Advances in Neural Information Processing Systems 35'),),
)
CHI2023 = Paper(
  'chi2023sandwich',
  'Chi, Ta-Chung and Fan, Ting-Han and Rudnicky, Alexander I. and Ramadge, Peter J.',
  'Dissecting Transformer Length Extrapolation via the Lens of Receptive Field Analysis',
  2023,
  'ACL 2023',
  _arxiv('2212.10356'),
  (('booktitle', 'Proceedings of the 61st Annual Meeting of the ACL'),),
)
RUOSS2023 = Paper(
  'ruoss2023randomized',
  'Ruoss, Anian and Delétang, Grégoire and Genewein, Tim and Grau-Moya, Jordi and Csordás, '
  'Róbert and Bennani, Mehdi and Legg, Shane and Veness, Joel',
  'Randomized Positional Encodings Boost Length Generalization of Transformers',
  2023,
  'ACL 2023',
  _arxiv('2305.16843'),
  (('booktitle', 'Proceedings of the 61st Annual Meeting of the ACL (Volume 2: Short Papers)'),),
)
QIN2024 = Paper(
  'qin2024exploring',
  'Qin, Zhen and Zhong, Yiran and Deng, Hui',
  'Exploring Transformer Extrapolation',
  2024,
  'AAAI 2024',
  _arxiv('2307.10156'),
  (('booktitle', 'Proceedings of the AAAI Conference on Artificial Intelligence'),),
)
SU2024 = Paper(
  'su2024roformer',
  'Su, Jianlin and Ahmed, Murtadha and Lu, Yu and Pan, Shengfeng and Bo, Wen and Liu, Yunfeng',
  'RoFormer: Enhanced Transformer with Rotary Position Embedding',
  2024,
  'Neurocomputing 568',
  _arxiv('2104.09864'),
  (('journal', 'Neurocomputing'), ('volume', '568'), ('pages', '127063')),
  kind='article',
)
LI2024 = Paper(
  'li2024fire',
  'Li, Shanda and You, Chong and Guruganesh, Guru and Ainslie, Joshua and Ontañón, Santiago '
  'and Zaheer, Manzil and Sanghai, Sumit and Yang, Yiming and Kumar, Sanjiv and Bhojanapalli, '
  'Srinadh',
  'Functional Interpolation for Relative Positions Improves Long Context Transformers',
  2024,
  'ICLR 2024',
  _arxiv('2310.04418'),
  (('booktitle', 'International Conference on Learning Representations'),),
)
MCLEISH2024 = Paper(
  'mcleish2024abacus',
  'McLeish, Sean and Bansal, Arpit and Stein, Alex and Jain, Neel and Kirchenbauer, John and '
  'Bartoldson, Brian R. and Kailkhura, Bhavya and Bhatele, Abhinav and Geiping, Jonas and '
  'Schwarzschild, Avi and Goldstein, Tom',
  'Transformers Can Do Arithmetic with the Right Embeddings',
  2024,
  'NeurIPS 2024',
  _arxiv('2405.17399'),
  (('booktitle', 'Advances in Neural Information Processing Systems 37'),),
)
CHO2024 = Paper(
  'cho2024coupling',
  'Cho, Hanseul and Cha, Jaeyoung and Awasthi, Pranjal and Bhojanapalli, Srinadh and Gupta, '
  'Anupam and Yun, Chulhee',
  'Position Coupling: Improving Length Generalization of Arithmetic Transformers Using Task '
  'Structure',
  2024,
  'NeurIPS 2024',
  _arxiv('2405.20671'),
  (('booktitle', 'Advances in Neural Information Processing Systems 37'),),
)
ZHENG2024 = Paper(
  'zheng2024dape',
  'Zheng, Chuanyang and others',
  'DAPE: Data-Adaptive Positional Encoding for Length Extrapolation',
  2024,
  'NeurIPS 2024',
  _arxiv('2405.14722'),
  (('booktitle', 'Advances in Neural Information Processing Systems 37'),),
)
ZHENG2025 = Paper(
  'zheng2025dapev2',
  'Zheng, Chuanyang and Gao, Yihang and Shi, Han and Xiong, Jing and Sun, Jiankai and Li, '
  'Jingyao and Huang, Minbin and Ren, Xiaozhe and Ng, Michael and Jiang, Xin and Li, Zhenguo '
  'and Li, Yu',
  'DAPE V2: Process Attention Score as Feature Map for Length Extrapolation',
  2025,
  'ACL 2025',
  'https://aclanthology.org/2025.acl-long.522/',
  (
    ('booktitle', 'Proceedings of the 63rd Annual Meeting of the ACL (Volume 1: Long Papers)'),
    ('pages', '10628--10666'),
  ),
)
GOLOVNEVA2024 = Paper(
  'golovneva2024cope',
  'Golovneva, Olga and Wang, Tianlu and Weston, Jason and Sukhbaatar, Sainbayar',
  "Contextual Position Encoding: Learning to Count What's Important",
  2024,
  'arXiv',
  _arxiv('2405.18719'),
  (('eprint', '2405.18719'), ('archivePrefix', 'arXiv')),
  kind='misc',
)
LIN2025 = Paper(
  'lin2025forgetting',
  'Lin, Zhixuan and Nikishin, Evgenii and He, Xu Owen and Courville, Aaron',
  'Forgetting Transformer: Softmax Attention with a Forget Gate',
  2025,
  'ICLR 2025',
  _arxiv('2503.02130'),
  (('booktitle', 'International Conference on Learning Representations'),),
)
TAN2025 = Paper(
  'tan2025stickbreaking',
  'Tan, Shawn and Yang, Songlin and Courville, Aaron and Panda, Rameswar and Shen, Yikang',
  'Scaling Stick-Breaking Attention: An Efficient Implementation and In-depth Study',
  2025,
  'ICLR 2025',
  _arxiv('2410.17980'),
  (('booktitle', 'International Conference on Learning Representations'),),
)
GOPALAKRISHNAN2025 = Paper(
  'gopalakrishnan2025pope',
  'Gopalakrishnan, Anand and Csordás, Róbert and Schmidhuber, Jürgen and Mozer, Michael C.',
  'Decoupling the "What" and "Where" With Polar Coordinate Positional Embeddings',
  2025,
  'arXiv',
  _arxiv('2509.10534'),
  (('eprint', '2509.10534'), ('archivePrefix', 'arXiv')),
  kind='misc',
)
